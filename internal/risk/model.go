package risk

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/tick"
)

// Side is the direction of a position or resting order.
type Side uint8

const (
	Buy  Side = iota + 1 // fx.Buy
	Sell                 // fx.Sell
)

func (s Side) String() string {
	switch s {
	case Buy:
		return "BUY"
	case Sell:
		return "SELL"
	}
	return "UNKNOWN"
}

// OrderType is how a resting order triggers. MARKET orders never rest, so they never reach the
// engine.
type OrderType uint8

const (
	Limit OrderType = iota + 1 // fx.Limit: buy when ask ≤ price, sell when bid ≥ price
	Stop                       // fx.Stop: buy when ask ≥ price, sell when bid ≤ price
)

func (t OrderType) String() string {
	switch t {
	case Limit:
		return "LIMIT"
	case Stop:
		return "STOP"
	}
	return "UNKNOWN"
}

// Sweep reasons.
const (
	SweepBoot           = "boot"
	SweepLeaseRestored  = "lease_restored"
	SweepUpdatesDropped = "updates_dropped" // the tick subscription lost updates (Config.Dropped)
)

// Position is an open position as the engine sees it. Prices and lots are floats: they rank and
// compare here, and the executor recomputes every amount it writes exactly (docs/architecture.md,
// «Money and the ledger»).
type Position struct {
	ID        int64
	AccountID int64
	Symbol    string
	Side      Side
	Volume    float64 // lots still open
	OpenPrice float64
	SL, TP    float64 // 0 = none
	// TrailDistance and TrailLevel are its trailing stop (trail.go): the distance it trails the
	// market by and its level now; 0 = none.
	TrailDistance, TrailLevel float64
}

// Order is a resting LIMIT or STOP order.
type Order struct {
	ID        int64
	AccountID int64
	Symbol    string
	Side      Side
	Type      OrderType
	Price     float64
	ExpiresAt time.Time // zero = GTC; GTD and DAY carry their deadline
}

// Account carries what the margin level needs. Levels are percent.
type Account struct {
	ID              int64
	Currency        string
	Balance         float64
	Leverage        int     // the account's own
	GroupLeverage   int     // the account group's cap; 0 = none
	MarginCallLevel float64 // alert below this (default 100 in the schema); 0 = never
	StopOutLevel    float64 // close positions at or below this (default 50)
	// Group is the account's group: where the group has its own terms on a symbol
	// (GroupTerms), its positions there are marked with them instead of the instrument's.
	Group string
	// MarginCalled, in a Snapshot, is whether the account's margin call is recorded (Alerts):
	// the engine starts from it, so a new holder neither records a margin call again nor
	// misses its end. Ignored in a Change.
	MarginCalled bool
}

// SymbolTerms are an account group's own terms on one symbol, in place of the instrument's
// Markup and LeverageMax (the dealer's per-group overrides, resolved by the catalog).
type SymbolTerms struct {
	Markup      float64 // price units, as Instrument.Markup
	LeverageMax int     // 0 = none
}

// GroupTerms are every symbol on which account group Group has its own terms; a symbol not in
// Symbols is marked with the instrument's.
type GroupTerms struct {
	Group   string
	Symbols map[string]SymbolTerms
}

// Instrument carries what pricing and margin need, as floats for the tick path; NewInstrument
// builds it from fx.Instrument.
type Instrument struct {
	Symbol       string
	Base, Quote  string
	ContractSize float64
	LeverageMax  int // the instrument's cap; 0 = none
	// HedgedMarginRate is the margin rate of each lot of a hedged (long+short) pair; the trading
	// catalog keeps it on the instrument's symbol group.
	HedgedMarginRate float64
	// Markup is the symbol group's markup in price units (markup points × point): a buy closes
	// at bid − markup, a sell at ask + markup.
	Markup float64
	// Halted: the instrument's status is HALTED (fx.InstrumentHalted), so the executor refuses
	// every close on it; stop-out passes its positions over (doc.go, "Stop-out").
	Halted bool
}

// NewInstrument is the engine's float copy of the domain instrument in, with its leverage cap
// and its symbol group's hedged margin rate and markup (in points).
func NewInstrument(in fx.Instrument, leverageMax int, hedgedMarginRate, markupPoints decimal.Decimal) Instrument {
	return Instrument{Symbol: in.Symbol, Base: in.Base, Quote: in.Quote, ContractSize: in.ContractSize.InexactFloat64(),
		LeverageMax: leverageMax, HedgedMarginRate: hedgedMarginRate.InexactFloat64(),
		Markup: markupPoints.Mul(in.Point).InexactFloat64(), Halted: in.Status == fx.InstrumentHalted}
}

// Snapshot is the whole view the engine starts from.
type Snapshot struct {
	Instruments []Instrument
	Accounts    []Account
	Positions   []Position // every OPEN position
	Orders      []Order    // every PENDING LIMIT or STOP order
	Groups      []GroupTerms
}

// Loader reads the snapshot from the database at boot. Load returns an error when the database
// cannot be read; the engine retries with backoff and evaluates no tick until a load succeeds.
type Loader interface {
	Load(ctx context.Context) (Snapshot, error)
}

// Gate admits or drops lease-guarded work (*gate.Gate): Admit returns nil when w may start now,
// and otherwise an error (gate.ErrNotHolder) after it has logged and counted the drop.
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
}

// ErrAlreadyClosed is what the Executor returns (wrapped or not) when the position is no longer
// open, or the order no longer pending: someone else's transaction won the row lock first (a
// trader's close racing a stop, a cancel racing a fill, an expiry). The engine then forgets the
// item and moves on; any other error puts it back under watch so a later tick can retry it.
var ErrAlreadyClosed = errors.New("already closed")

// ErrMarketUnavailable is what the Executor returns (wrapped) when it refuses a close or fill
// for the state of the market, not of the position: the symbol's market is closed or not
// quoting, or the instrument is HALTED. The item stays under watch; a stop-out passes such a
// position over and goes on to the account's next loser at once, and tries it again at the
// first tick of its symbol after the refusal (doc.go, "Stop-out").
var ErrMarketUnavailable = errors.New("market unavailable")

// ErrOrderModified is what the Executor returns (wrapped) when the order it was asked to fill was
// modified after the engine decided: as stored it does not trigger at the quote that fired it.
// Nothing was written; the engine puts the order back under watch with the values its
// OrderModified change carries, and a later tick decides it again.
var ErrOrderModified = errors.New("order modified since its trigger")

// Executor performs the engine's decisions. Each call is one fenced transaction on the
// executor's side, made off the tick path by a worker, never while the engine holds its lock.
//
// Close closes all of position id at the current quote (never at the stop price: at is the
// quote that triggered it, for the record and for a gap). accountID is the position's account as
// the engine holds it (a position never changes account): the executor locks it without reading
// it first. Fill fills resting order id the same
// way. Both return nil on commit, an error wrapping ErrAlreadyClosed when the row is no longer
// open or pending, an error wrapping ErrMarketUnavailable when the market refuses it now, and
// any other error when nothing was written. After a commit the executor
// reports the change through Engine.Apply, as every other committed change is reported.
//
// StopOut is Close for a stop-out (reason fx.CloseStopOut), with the decision the executor
// records beside the close (the account.stop_out event): the figures and terms the engine
// decided on, so the record can be judged against the terms in force at that moment.
type Executor interface {
	Close(ctx context.Context, positionID, accountID int64, reason fx.CloseReason, at tick.Quote) error
	StopOut(ctx context.Context, positionID, accountID int64, at tick.Quote, why StopOut) error
	Fill(ctx context.Context, orderID int64, at tick.Quote) error
}

// StopOut is one stop-out decision as the engine made it: the account's margin level, equity
// and used margin (account currency, floats as the engine marks them) at the round that picked
// the position, and the terms it marked with — its group and that group's stop-out level, and on
// each symbol the account held the effective leverage and the markup (price units).
type StopOut struct {
	DecidedAt    time.Time // when the tick (or sweep) that decided it arrived
	MarginLevel  float64   // percent, at or below StopOutLevel
	Equity       float64   // balance + closes already handed off + floating profit
	UsedMargin   float64
	Group        string
	StopOutLevel float64
	Symbols      []SymbolMark
}

// SymbolMark is the terms one symbol of a stopped-out account was marked with.
type SymbolMark struct {
	Symbol   string
	Leverage int     // the least of the account's, its group's and the symbol's cap
	Markup   float64 // price units
}

// Alerts records margin calls; level is the margin level in percent. It is called off the tick
// path: MarginCall once per crossing below the account's margin-call level, MarginCallCleared
// once the account is back at or above it, or holds no position (level 0), after a MarginCall.
// Either error is retried at a later evaluation.
type Alerts interface {
	MarginCall(ctx context.Context, accountID int64, level float64) error
	MarginCallCleared(ctx context.Context, accountID int64, level float64) error
}

// ChangeKind names a committed change the engine must follow.
type ChangeKind uint8

const (
	PositionOpened     ChangeKind = iota + 1 // Position whole (an upsert)
	PositionModified                         // Position.ID, SL, TP (0 = removed)
	PositionReduced                          // Position.ID, Volume = lots still open; with the balance
	PositionClosed                           // Position.ID; with the balance
	OrderPlaced                              // Order whole (an upsert)
	OrderCancelled                           // Order.ID
	OrderFilled                              // Order.ID; send PositionOpened and the balance with it
	OrderExpired                             // Order.ID
	AccountUpserted                          // Account whole (created, or leverage/levels/group changed)
	BalanceChanged                           // Account.ID, Account.Balance = balance after the commit
	InstrumentUpserted                       // Instrument whole
	GroupTermsSet                            // GroupTerms whole (an account group's symbol terms)
	// AccountTermsChanged: Account.ID with its Group and that group's GroupLeverage,
	// MarginCallLevel and StopOutLevel after an account moved group or its group changed; the
	// rest is kept (a balance read beside the terms could be older than one a close just
	// reported). The group matters as much as the levels: it picks the GroupTerms the account's
	// symbols are marked with.
	AccountTermsChanged
	// OrderModified: Order whole after a modify in place (docs/orders.md, «Modify a resting
	// order»): its trigger moves in its heap in O(log n); an order the engine no longer holds is
	// added (an upsert, like OrderPlaced).
	OrderModified
	// TrailSet: Position.ID with its TrailDistance and TrailLevel (both 0 = the trailing stop
	// removed), after a trader set, changed or removed it.
	TrailSet
)

// Change is one committed change. Every field it carries is absolute (a volume, a balance, a
// stop level), never a delta, so applying one twice, or applying one the snapshot already
// holds, changes nothing; a terms change (AccountTermsChanged, InstrumentUpserted,
// GroupTermsSet) equal to what the engine holds does not even re-mark an account.
type Change struct {
	Kind       ChangeKind
	Position   Position
	Order      Order
	Account    Account
	Instrument Instrument
	GroupTerms GroupTerms
}
