package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// RiskDesk is the trading side of the risk engine (docs/architecture.md, «The risk engine»): its
// Loader (the view it starts from), its Executor (every close and fill it decides, through the same
// fenced ledger paths as a trader's), and the refresh of balances other processes change. The
// engine passes each close and fill through its gate before it calls Close or Fill, which do not
// pass it again: one gate per unit of work, and the batch's fence behind it.
type RiskDesk struct {
	svc *Service
	// observe, when set, counts each engine close by reason and result (metrics.Closes).
	observe func(reason, result string)

	// versions is each account's balanceVersion as last applied to the view (FollowBalances);
	// touched only by Load and the refresh, which run one after the other.
	versions map[int64]int64
}

// NewRiskDesk adapts svc to the risk engine. observe may be nil.
func NewRiskDesk(svc *Service, observe func(reason, result string)) *RiskDesk {
	return &RiskDesk{svc: svc, observe: observe}
}

// Load reads every OPEN position, PENDING LIMIT/STOP/STOP_LIMIT order, account and instrument
// into one Snapshot (LoadInto).
func (r *RiskDesk) Load(ctx context.Context) (risk.Snapshot, error) {
	var s risk.Snapshot
	err := r.LoadInto(ctx, &s)
	return s, err
}

// loadBatch is how many positions or orders the view is handed at a time while their rows still
// arrive.
const loadBatch = 1024

// LoadInto reads every OPEN position, PENDING LIMIT/STOP/STOP_LIMIT order, account and
// instrument into sink, and remembers each account's balanceVersion as read so the balance
// refresh starts where the read ends (docs/boot.md, «The risk view's read»).
//
// The catalog, the accounts, the positions and the orders are four independent reads, run at
// once on separate connections: each is consistent in itself (one statement, or the catalog's
// own reads), and none needs another's instant. The engine keeps every change committed since it
// was created — before any of these reads began — and replays it onto the view once loaded
// (risk.Engine.Apply); every change is an upsert, a removal or an absolute figure, so a read that
// already holds it and a read that does not end the same. A change to a position and to its
// account's balance may thus come from two instants, and the replay puts both in step. What is
// not replayed — another process's balance changes — is followed by version, and an account's
// balance and version come from the same row of the same statement.
//
// The positions and the orders reach the sink in batches while their statements still stream,
// once the terms and the accounts (the shorter reads) are in: the engine builds its view beside
// the longest read instead of after it. The sink is called from this goroutine only.
func (r *RiskDesk) LoadInto(ctx context.Context, sink risk.ViewSink) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg        sync.WaitGroup
		errs      [4]error
		cat       *catalog.Catalog
		accounts  []riskViewAccount
		links     = map[int64]venueLink{} // replaces the links, so none outlives its position
		terms     = make(chan struct{})   // closed when the catalog and the accounts are read
		termsLeft sync.WaitGroup
		positions = make(chan []risk.Position, 4)
		orders    = make(chan []book.Order, 4)
	)
	// Each read cancels the others when it fails: the load is retried whole (risk.Engine.Run).
	// Its then funcs run once it has ended and its error is set.
	read := func(i int, f func() error, then ...func()) {
		wg.Go(func() {
			if errs[i] = f(); errs[i] != nil {
				cancel()
			}
			for _, g := range then {
				g()
			}
		})
	}
	termsLeft.Add(2)
	go func() { termsLeft.Wait(); close(terms) }()
	read(0, func() (err error) {
		cat, err = catalog.Load(ctx, r.svc.db)
		return err
	}, termsLeft.Done)
	read(1, func() (err error) {
		accounts, err = store.QueryAll(ctx, r.svc.db, "risk view: accounts", newAccountRow().scan, riskViewAccountsSQL)
		return err
	}, termsLeft.Done)
	read(2, func() error {
		defer close(positions)
		row := newPositionRow()
		return store.QueryBatches(ctx, r.svc.db, "risk view: positions", func(sc store.Scanner) (risk.Position, error) {
			p, venueTradeID, err := row.scan(sc)
			if err == nil && venueTradeID != "" {
				links[p.ID] = venueLink{tradeID: venueTradeID, symbol: p.Symbol}
			}
			return p, err
		}, loadBatch, sendTo(ctx, positions), RiskViewPositionsSQL)
	})
	read(3, func() error {
		defer close(orders)
		return store.QueryBatches(ctx, r.svc.db, "risk view: orders", scanRiskViewOrder, loadBatch, sendTo(ctx, orders), riskViewOrdersSQL)
	})
	versions, err := r.fill(ctx, sink, terms, &cat, &accounts, positions, orders)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err := errors.Join(append(errs[:], err)...); err != nil {
		return fmt.Errorf("risk view: %w", err)
	}
	r.versions = versions
	r.svc.links.replace(links)
	return nil
}

// sendTo hands a batch to the goroutine that fills the sink, or gives up when the load does.
func sendTo[T any](ctx context.Context, ch chan<- []T) func([]T) error {
	return func(b []T) error {
		select {
		case ch <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fill hands the reads' rows to sink as LoadInto's reads return them: the terms and the
// accounts once both are read, then the positions' and the orders' batches as they come. It
// returns each account's balanceVersion as read, or ctx's error when the load ends early.
func (r *RiskDesk) fill(ctx context.Context, sink risk.ViewSink, terms <-chan struct{}, catp **catalog.Catalog, accountsp *[]riskViewAccount,
	positions <-chan []risk.Position, orders <-chan []book.Order) (map[int64]int64, error) {
	select {
	case <-terms:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cat, accounts := *catp, *accountsp
	if cat == nil || ctx.Err() != nil {
		return nil, errors.New("the catalog or the accounts were not read") // LoadInto reports why
	}
	instruments := make([]risk.Instrument, 0, len(cat.List))
	for _, in := range cat.List {
		instruments = append(instruments, in.RiskTerms())
	}
	sink.AddTerms(instruments, cat.RiskGroups())
	versions := make(map[int64]int64, len(accounts))
	groups := make(map[int64]string, len(accounts))
	ras := make([]risk.Account, 0, len(accounts))
	for _, a := range accounts {
		// With the margin calls recorded (MarginCall), so the engine neither records one again
		// nor misses its end.
		ra := withGroup(a.Account, cat.AccountGroup(a.Group))
		ras = append(ras, ra)
		versions[a.ID], groups[a.ID] = a.version, a.Group
	}
	sink.AddAccounts(ras)
	for positions != nil || orders != nil {
		select {
		case b, ok := <-positions:
			if !ok {
				positions = nil
				continue
			}
			sink.AddPositions(b)
		case b, ok := <-orders:
			if !ok {
				orders = nil
				continue
			}
			// A triggered STOP_LIMIT is keyed with its account's group terms (restingKey): a new
			// holder goes on with it as a LIMIT at its limit.
			ros := make([]risk.Order, 0, len(b))
			for _, o := range b {
				if o.Type != fx.StopLimit || o.TriggeredAt == nil {
					ros = append(ros, riskOrder(o))
					continue
				}
				t, known := termsOf(cat, groups[o.AccountID], o.Symbol)
				ros = append(ros, restingKey(o, t, known))
			}
			sink.AddOrders(ros)
		}
	}
	return versions, nil
}

// riskViewAccountsSQL is the risk view's read of the accounts: what the engine marks them with,
// their balanceVersion (FollowBalances) and whether a margin call is recorded, in one pass of the
// primary key. Not AccountCols: the view needs none of the execution mode's lookup per account.
const riskViewAccountsSQL = "SELECT `id`, `accountGroup`, `currency`, `leverage`, `balance`, `balanceVersion`, `marginCallAt` IS NOT NULL FROM `fx_account`"

// riskViewAccount is one row of riskViewAccountsSQL: an account as the engine keeps it, with the
// version its balance was read at.
type riskViewAccount struct {
	risk.Account
	version int64
}

// accountRow is the one destination every row of riskViewAccountsSQL is scanned into, as
// positionRow is for the positions. The balance goes from its text to the nearest float64, the
// figure riskAccount takes from a decimal; the group's terms are added by the caller
// (withGroup). The groups and the currencies are interned: 20,000 accounts share a handful.
type accountRow struct {
	id, version, leverage int64
	group, currency       sql.RawBytes
	balance               sql.RawBytes
	marginCalled          bool
	dest                  []any
	names                 interned
}

func newAccountRow() *accountRow {
	r := &accountRow{names: interned{}}
	r.dest = []any{&r.id, &r.group, &r.currency, &r.leverage, &r.balance, &r.version, &r.marginCalled}
	return r
}

func (r *accountRow) scan(sc store.Scanner) (riskViewAccount, error) {
	if err := sc.Scan(r.dest...); err != nil {
		return riskViewAccount{}, err
	}
	v, err := strconv.ParseFloat(string(r.balance), 64)
	if err != nil {
		return riskViewAccount{}, fmt.Errorf("account %d: %w", r.id, err)
	}
	return riskViewAccount{Account: risk.Account{ID: r.id, Group: r.names.intern(r.group), Currency: r.names.intern(r.currency), Leverage: int(r.leverage),
		Balance: v, MarginCalled: r.marginCalled}, version: r.version}, nil
}

// riskViewOrdersSQL is the risk view's read of the resting orders, on idx_fx_order_status
// (`status`, `symbol`): the triggered STOP_LIMITs among them too, so no second read finds those,
// and only the columns riskOrder and restingKey use — not OrderCols, whose order's position is a
// lookup in idx_fx_position_order per order, with twenty columns the view never uses.
const riskViewOrdersSQL = "SELECT o.`id`, o.`accountId`, o.`symbol`, o.`side`, o.`type`, o.`price`, o.`expiresAt`, o.`limitPrice`, o.`triggeredAt` " +
	"FROM `fx_order` o WHERE o.`status` = 'PENDING' AND o.`type` IN ('LIMIT', 'STOP', 'STOP_LIMIT')"

// scanRiskViewOrder reads one row of riskViewOrdersSQL: a PENDING order with what the engine keys
// it by.
func scanRiskViewOrder(sc store.Scanner) (book.Order, error) {
	o := book.Order{Status: fx.OrderPending}
	err := sc.Scan(&o.ID, &o.AccountID, &o.Symbol, &o.Side, &o.Type, &o.Price, &o.ExpiresAt, &o.LimitPrice, &o.TriggeredAt)
	return o, err
}

// RiskViewPositionsSQL is the risk view's read of the open book (Load), exported for the boot
// benchmark's row rate. It goes through (status, id), forced: the index's OPEN range and never
// the closed history around it. Left to itself the optimiser scans the whole table once open
// positions are more than a small share of the rows, as its statistics estimate that share
// (BenchmarkRiskViewLoad; docs/boot.md). It reads only what the engine keeps
// (positionRow), not PositionCols: those carry a lookup of the account's currency per
// position and ten columns the view never uses.
const RiskViewPositionsSQL = "SELECT p.`id`, p.`accountId`, p.`symbol`, p.`side`, p.`volume`, p.`openPrice`, p.`sl`, p.`tp`, " +
	"p.`trailDistance`, p.`trailLevel`, p.`venueTradeId` FROM `fx_position` p FORCE INDEX (`idx_fx_position_open`) WHERE p.`status` = 'OPEN'"

// positionRow is the one destination every row of RiskViewPositionsSQL is scanned into: its
// columns are kept as the driver's bytes until they are converted, and the same pointers serve
// every row, so a row costs no allocation of its own (a year's 50,000 rows cost eleven each
// with a destination per row — a fifth of the holder's processor during a boot, in the
// allocator and the collector; docs/boot.md, «The risk view's read»). Each DECIMAL goes from its
// text to the nearest float64 (strconv.ParseFloat), the float riskPosition takes from a
// decimal.Decimal (InexactFloat64) — the same figure without a decimal per column; a NULL stop
// or trail is 0, as there. The symbols are interned: a year names a few dozen.
type positionRow struct {
	id, accountID                                        int64
	symbol, side, venueTradeID                           sql.RawBytes
	volume, openPrice, sl, tp, trailDistance, trailLevel sql.RawBytes
	dest                                                 []any
	symbols                                              interned
}

func newPositionRow() *positionRow {
	r := &positionRow{symbols: interned{}}
	r.dest = []any{&r.id, &r.accountID, &r.symbol, &r.side, &r.volume, &r.openPrice, &r.sl, &r.tp, &r.trailDistance, &r.trailLevel, &r.venueTradeID}
	return r
}

// scan reads the next row into the engine's position, and the venue trade it is linked to ("" for
// an INTERNAL position).
func (r *positionRow) scan(sc store.Scanner) (risk.Position, string, error) {
	if err := sc.Scan(r.dest...); err != nil {
		return risk.Position{}, "", err
	}
	p := risk.Position{ID: r.id, AccountID: r.accountID, Symbol: r.symbols.intern(r.symbol), Side: risk.Buy}
	if string(r.side) == string(fx.Sell) {
		p.Side = risk.Sell
	}
	for _, f := range [...]struct {
		to   *float64
		text sql.RawBytes
	}{{&p.Volume, r.volume}, {&p.OpenPrice, r.openPrice}, {&p.SL, r.sl}, {&p.TP, r.tp}, {&p.TrailDistance, r.trailDistance}, {&p.TrailLevel, r.trailLevel}} {
		if f.text == nil {
			continue
		}
		v, err := strconv.ParseFloat(string(f.text), 64)
		if err != nil {
			return p, "", fmt.Errorf("position %d: %w", p.ID, err)
		}
		*f.to = v
	}
	return p, string(r.venueTradeID), nil
}

// interned hands out one string per distinct text: a load's rows name a few symbols, groups and
// currencies many thousands of times.
type interned map[string]string

func (m interned) intern(b []byte) string {
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	m[s] = s
	return s
}

// FollowBalances keeps the view's balances in step with deals posted outside this Service —
// the rollover job, in fxdesk-cron or on the inline scheduler: it posts through the same ledger
// (internal/ledger) but in its own transactions, so no change reaches the engine through
// notify — until ctx ends: every interval it reads every account's balanceVersion and applies
// the balance of each whose version differs from the one last applied.
//
// Why by version and not by deal id: deal ids are assigned at insert and transactions commit in
// any order, so "deals newer than the newest seen" skipped a swap batch that inserted its deals
// before a close's deal and committed after it. The ledger bumps an account's
// balanceVersion in the statement that moves its balance, under the row lock, so every committed
// balance has its own version, and a version differing from the last applied is seen at the
// first refresh after its commit, whatever the commit order. A desk-wide "changed since" cursor
// would need an order of commits, which MySQL does not expose portably (AUTO_INCREMENT and
// timestamps are taken at write time, not commit), and a counter row taken by every writer
// would serialise every balance change of the desk behind one lock. So the refresh reads all
// (id, balanceVersion, balance) rows — the clustered index, in one pass — and compares in
// memory; the column has no index, because every deal would then pay a secondary-index write.
// Its cost grows with the number of accounts (BenchmarkRefreshBalances; docs/operations.md),
// not with the desk's traffic.
//
// Why this and not a periodic full reload: a reload costs the whole desk every time and the
// engine has no way to drop what it no longer lists; balances are the only thing another
// process changes that the engine cannot derive itself (orders that reconcile expires are
// discarded by the engine on its own clock, and nothing else opens or closes positions). A
// refresh that read a balance just before this process committed a close may apply the older
// figure after the close's own change; the close moved the version past the one the refresh
// recorded, so the next refresh puts it right.
//
// Call it only after the engine's first load (Load sets the starting point), from one goroutine.
func (r *RiskDesk) FollowBalances(ctx context.Context, every time.Duration, apply func(context.Context, ...risk.Change)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.refreshBalances(ctx, apply); err != nil && ctx.Err() == nil {
			r.svc.log.WarnContext(ctx, "risk view: balance refresh failed; retried next interval", slog.Any("err", err))
		}
	}
}

// refreshBalances applies, in one call, the balance of every account whose balanceVersion
// differs from the one last applied.
func (r *RiskDesk) refreshBalances(ctx context.Context, apply func(context.Context, ...risk.Change)) error {
	if r.versions == nil {
		r.versions = map[int64]int64{}
	}
	var changes []risk.Change
	var seen []int64
	err := eachVersion(ctx, r.svc.db, func(id, version int64, balance func() (decimal.Decimal, error)) error {
		if known, ok := r.versions[id]; ok && known == version {
			return nil
		}
		bal, err := balance()
		if err != nil {
			return err
		}
		changes = append(changes, risk.Change{Kind: risk.BalanceChanged, Account: risk.Account{ID: id, Balance: bal.InexactFloat64()}})
		seen = append(seen, id, version)
		return nil
	})
	if err != nil {
		return fmt.Errorf("refresh balances: %w", err)
	}
	if len(changes) > 0 {
		apply(ctx, changes...)
	}
	for i := 0; i < len(seen); i += 2 {
		r.versions[seen[i]] = seen[i+1]
	}
	return nil
}

// eachVersion calls fn with every account's id and balanceVersion; balance parses the row's
// balance, which an unchanged account never needs (a refresh of an idle desk parses none).
func eachVersion(ctx context.Context, q book.Querier, fn func(id, version int64, balance func() (decimal.Decimal, error)) error) error {
	rows, err := q.QueryContext(ctx, "SELECT `id`, `balanceVersion`, `balance` FROM `fx_account`")
	if err != nil {
		return fmt.Errorf("balance versions: %w", err)
	}
	defer rows.Close()
	var id, v int64
	var raw sql.RawBytes
	balance := func() (decimal.Decimal, error) { return decimal.NewFromString(string(raw)) }
	for rows.Next() {
		if err := rows.Scan(&id, &v, &raw); err != nil {
			return fmt.Errorf("balance versions: %w", err)
		}
		if err := fn(id, v, balance); err != nil {
			return fmt.Errorf("balance versions: account %d: %w", id, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("balance versions: %w", err)
	}
	return nil
}

// Close closes all of position id at the current market, through the same fenced transaction
// as a trader's close, recording reason. The batch locks accountID, the position's account as the
// engine holds it, without reading it from the position first; a close of a position that is not
// that account's is refused as not found, like any close of a position its account does not own.
// It returns an error wrapping risk.ErrAlreadyClosed
// when the position is no longer open.
func (r *RiskDesk) Close(ctx context.Context, id, accountID int64, reason fx.CloseReason, at tick.Quote) error {
	return r.close(ctx, id, accountID, reason, nil, at)
}

// StopOut is Close for a stop-out, recording the engine's decision (why) on the stop-out's
// account.stop_out event.
func (r *RiskDesk) StopOut(ctx context.Context, id, accountID int64, at tick.Quote, why risk.StopOut) error {
	return r.close(ctx, id, accountID, fx.CloseStopOut, &why, at)
}

func (r *RiskDesk) close(ctx context.Context, id, accountID int64, reason fx.CloseReason, stop *risk.StopOut, at tick.Quote) error {
	_, err := r.svc.closePosition(ctx, 0, accountID, id, nil, reason, stop, at.ReceivedAt)
	if r.observe != nil {
		result := "closed"
		switch {
		case errors.Is(err, risk.ErrAlreadyClosed):
			result = "already_closed"
		case err != nil:
			result = fx.ErrorCode(err)
		}
		r.observe(string(reason), result)
	}
	return err
}

// Fill fills resting order id at the current market (a gap fills at the gapped price, never at
// the order's), in one fenced transaction through the same ledger path as a MARKET submit. It
// returns an error wrapping risk.ErrAlreadyClosed when the order is no longer pending; an order
// the account can no longer carry (margin) is REJECTED, and reported the same way.
func (r *RiskDesk) Fill(ctx context.Context, id int64, at tick.Quote) error {
	return r.svc.fillPending(ctx, id, at)
}

// fillPending fills resting order id, which the quote at fired (stillTriggers).
func (s *Service) fillPending(ctx context.Context, id int64, at tick.Quote) error {
	var accountID int64
	var symbol string
	var oco *int64 // an OCO's other leg, locked with it (oco.go); the link never changes
	err := s.db.QueryRowContext(ctx, "SELECT `accountId`, `symbol`, `ocoOrderId` FROM `fx_order` WHERE `id` = ? AND `status` = 'PENDING'", id).Scan(&accountID, &symbol, &oco)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fill order %d: %w", id, risk.ErrAlreadyClosed)
	}
	if err != nil {
		return fmt.Errorf("fill order %d: %w", id, err)
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return err
	}
	in, ok := cat.Instruments[symbol]
	if !ok {
		return fmt.Errorf("fill order %d: instrument %s is missing", id, symbol)
	}
	if in.Status == fx.InstrumentHalted {
		return book.ErrHalted(in.Symbol)
	}
	// Refused for market state before it queues; its batch prices it again.
	if _, err := book.NewMarket(s.prices, cat).Tradable(symbol); err != nil {
		return err
	}
	// The risk engine admitted this fill (gate.RiskFill) before it called; its batch's fence
	// refuses it if the lease was lost since.
	w := &restingFill{s: s, Queued: book.NewQueued(ctx, gate.Fill, "fill resting order", accountID, slog.Int64("order_id", id), slog.String("symbol", symbol)), id: id, at: at, oco: oco}
	s.commits.Submit(w)
	return w.Err
}

// limitStillReached refuses a LIMIT's fill, for the state of the market, when the quote its
// batch fills at no longer reaches the limit the engine fired on (at): the market moved back
// in the milliseconds between the trigger and the batch, and a limit never fills worse than its
// price on the feed's side (docs/orders.md, «What a gap does»). The order stays under watch and
// fills on a later tick that reaches it. A zero at (no firing quote) is not judged, as
// stillTriggers.
func limitStillReached(o book.Order, q book.Quote, at tick.Quote) error {
	if o.Type != fx.Limit || o.Price == nil || at.Bid == 0 && at.Ask == 0 {
		return nil
	}
	if o.Side == fx.Buy && q.Ask.GreaterThan(*o.Price) || o.Side == fx.Sell && q.Bid.LessThan(*o.Price) {
		return fmt.Errorf("fill order %d: the market moved back past its limit %s before the fill (bid %s, ask %s): %w",
			o.ID, o.Price, q.Bid, q.Ask, risk.ErrMarketUnavailable)
	}
	return nil
}

// restingFill is a resting order the risk engine triggered, waiting for its group commit.
type restingFill struct {
	book.Queued
	s  *Service // the desk that queued it (its venue, its links, its log)
	id int64
	at tick.Quote // the quote that fired it

	fill     openedFill
	net      *netFill // a NETTING or FIFO account's fill, instead of fill
	rejected error    // why the account could not carry it: the order was REJECTED instead
	a        book.Account
	// oco is the other leg of an OCO pair, cancelled by this fill (oco.go); cancelled is set
	// when this batch cancelled it.
	oco, cancelled *int64
	// triggered: a STOP_LIMIT's stop triggered in this batch (stoplimit.go); resting is how the
	// engine keys it when it rests as a LIMIT instead of filling.
	triggered bool
	resting   risk.Order
}

func (w *restingFill) Wants(l *book.Plan) {
	l.Account(w.Account)
	l.Order(w.id)
	if w.oco != nil {
		l.Order(*w.oco)
	}
	l.ExposuresOf(w.Account)
}

func (w *restingFill) Apply(r *book.Rows) error {
	w.fill, w.rejected, w.cancelled, w.triggered, w.resting, w.net = openedFill{}, nil, nil, false, risk.Order{}, nil
	a, found := r.Accounts[w.Account]
	if !found {
		return book.AccountNotFound(w.Account)
	}
	o, exists := r.Orders[w.id]
	if !exists || o.Status != fx.OrderPending || o.AccountID != a.ID {
		status := ""
		if exists {
			status = o.Status
		}
		return fmt.Errorf("fill order %d (%s): %w", w.id, status, risk.ErrAlreadyClosed)
	}
	if err := stillTriggers(*o, w.at); err != nil {
		return err
	}
	if o.ExpiresAt != nil && !o.ExpiresAt.After(r.Now) {
		return fmt.Errorf("fill order %d: expired at %s: %w", w.id, o.ExpiresAt.Format(time.RFC3339), risk.ErrAlreadyClosed)
	}
	t, ok := termsOf(r.Catalog, a.Group, o.Symbol)
	if !ok {
		return fmt.Errorf("fill order %d: instrument %s is missing", w.id, o.Symbol)
	}
	in := t.Instrument
	if in.Status == fx.InstrumentHalted {
		return book.ErrHalted(in.Symbol)
	}
	q, err := r.Market.Tradable(o.Symbol)
	if err != nil {
		return err
	}
	price := book.FillPrice(in, q, o.Side)
	if err := limitStillReached(*o, q, w.at); err != nil {
		return err
	}
	if o.Type == fx.StopLimit {
		if rest, err := w.stopLimitTrigger(r, a, o, t, price); rest || err != nil {
			return err
		}
	}
	// A symbol its group made close-only or disabled, or limits its volume no longer admits,
	// rejects the order as the margin does.
	err = checkOpen(t, o.Volume)
	var commission decimal.Decimal
	var after book.Metrics
	var net *netDecision
	if err == nil {
		commission, after, net, err = fillCheckMode(r, a, in, o.Side, o.Volume, price)
	}
	if refused := stateRefusal(*a, actOpen); refused != nil {
		// A CLOSE_ONLY or DISABLED account takes no new exposure: the order it left resting is
		// rejected at its trigger, like one the account's margin cannot carry.
		err = refused
	}
	if code := fx.ErrorCode(err); code == fx.ECONFLICT || code == fx.EINVALID {
		// The account cannot carry the position now: the order is rejected rather than retried
		// on every tick. It moves no money.
		r.Writes.Exec("UPDATE `fx_order` SET `status` = 'REJECTED' WHERE `id` = ?", w.id)
		o.Status, w.rejected = fx.OrderRejected, err
		return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderRejected, Term: w.s.term(),
			Payload: events.Rejected{Order: events.OrderOf(*o), Reason: fx.ErrorMessage(err)}})
	}
	if err != nil {
		return err
	}
	r.Writes.Exec("UPDATE `fx_order` SET `status` = 'FILLED', `fillPrice` = ? WHERE `id` = ?", price, w.id)
	orderVar, _ := r.SessionVar("o")
	r.Writes.Exec(book.SetVarSQL(orderVar, "?"), w.id)
	o.Status, o.FillPrice = fx.OrderFilled, &price
	if net != nil {
		if w.net, err = w.s.writeNet(r, a, in, *o, orderVar, price, net, events.OrderTriggered); err != nil {
			return err
		}
	} else if w.fill, err = openPosition(r, a, in, *o, orderVar, price, commission, &after, nil, events.OrderTriggered, w.s.term()); err != nil {
		return err
	}
	if err := w.cancelPartner(r, a, o); err != nil {
		return err
	}
	w.a = *a
	return nil
}

func (w *restingFill) Committed(r *book.Rows, ids *book.IDs) []risk.Change {
	if w.rejected != nil {
		w.s.log.WarnContext(w.Ctx, "resting order rejected at its trigger", slog.Int64("order", w.id), slog.String("why", w.rejected.Error()))
		w.Err = fmt.Errorf("fill order %d: rejected: %w", w.id, risk.ErrAlreadyClosed)
		return []risk.Change{{Kind: risk.OrderCancelled, Order: risk.Order{ID: w.id}}}
	}
	if w.resting.ID != 0 {
		return []risk.Change{{Kind: risk.OrderPlaced, Order: w.resting}} // a STOP_LIMIT now rests as a LIMIT
	}
	var changes []risk.Change
	if w.net != nil {
		_, _, _, netted := w.net.committed(r, ids, w.a)
		changes = append([]risk.Change{{Kind: risk.OrderFilled, Order: risk.Order{ID: w.id}}}, netted...)
	} else {
		p, _ := w.fill.written(r, ids)
		changes = []risk.Change{{Kind: risk.OrderFilled, Order: risk.Order{ID: w.id}}, positionOpened(p), balanceChanged(w.a)}
	}
	if w.cancelled != nil {
		changes = append(changes, risk.Change{Kind: risk.OrderCancelled, Order: risk.Order{ID: *w.cancelled}})
	}
	return changes
}

func (w *restingFill) Failed(err error) error { return fmt.Errorf("fill order %d: %w", w.id, err) }

// ---- changes reported to the engine ----

func (s *Service) notify(ctx context.Context, changes ...risk.Change) {
	if s.onChange != nil {
		s.onChange(ctx, changes...)
	}
}

// alreadyClosedError is the ECONFLICT a client sees for a position that is no longer open,
// which the risk engine recognises as risk.ErrAlreadyClosed.
type alreadyClosedError struct{ fe *fx.Error }

func errAlreadyClosed(id int64) error {
	return alreadyClosedError{fx.Errorf(fx.ECONFLICT, "Position %d is already closed.", id)}
}

func (e alreadyClosedError) Error() string   { return e.fe.Error() }
func (e alreadyClosedError) Unwrap() []error { return []error{e.fe, risk.ErrAlreadyClosed} }

func floatOf(d *decimal.Decimal) float64 {
	if d == nil {
		return 0
	}
	return d.InexactFloat64()
}

func riskSide(s fx.Side) risk.Side {
	if s == fx.Sell {
		return risk.Sell
	}
	return risk.Buy
}

func riskPosition(p book.Position) risk.Position {
	return risk.Position{ID: p.ID, AccountID: p.AccountID, Symbol: p.Symbol, Side: riskSide(p.Side), Volume: p.Volume.InexactFloat64(),
		OpenPrice: p.OpenPrice.InexactFloat64(), SL: floatOf(p.SL), TP: floatOf(p.TP), TrailDistance: floatOf(p.TrailDistance), TrailLevel: floatOf(p.TrailLevel)}
}

func positionOpened(p book.Position) risk.Change {
	return risk.Change{Kind: risk.PositionOpened, Position: riskPosition(p)}
}

func riskOrder(o book.Order) risk.Order {
	ro := risk.Order{ID: o.ID, AccountID: o.AccountID, Symbol: o.Symbol, Side: riskSide(o.Side), Type: risk.Limit, Price: floatOf(o.Price)}
	switch o.Type {
	case fx.Stop:
		ro.Type = risk.Stop
	case fx.StopLimit:
		ro = riskStopLimit(o, ro)
	}
	if o.ExpiresAt != nil {
		ro.ExpiresAt = *o.ExpiresAt
	}
	return ro
}

func orderPlaced(o book.Order) risk.Change {
	return risk.Change{Kind: risk.OrderPlaced, Order: riskOrder(o)}
}

func riskAccount(a book.Account, g catalog.AccountGroup) risk.Account {
	return withGroup(risk.Account{ID: a.ID, Currency: a.Currency, Balance: a.Balance.InexactFloat64(), Leverage: a.Leverage, Group: a.Group}, g)
}

// withGroup is a with its account group's terms.
func withGroup(a risk.Account, g catalog.AccountGroup) risk.Account {
	a.GroupLeverage, a.MarginCallLevel, a.StopOutLevel = g.LeverageMax, g.MarginCallLevel.InexactFloat64(), g.StopOutLevel.InexactFloat64()
	return a
}

func accountUpserted(a book.Account, g catalog.AccountGroup) risk.Change {
	return risk.Change{Kind: risk.AccountUpserted, Account: riskAccount(a, g)}
}

func balanceChanged(a book.Account) risk.Change {
	return risk.Change{Kind: risk.BalanceChanged, Account: risk.Account{ID: a.ID, Balance: a.Balance.InexactFloat64()}}
}
