package invariant

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Scope is what of the database the checks judge row by row. A soak over a pre-filled history
// (docs/soak.md, «A pre-filled month») judges its own accounts — those opened after the fill —
// the audit rows and end-of-day days written after it; the history itself is held to the
// ledger's rule over SQL sums (PrefilledLedger), which cover the accounts the desk's jobs touch
// during the run (swaps, stop-outs) as well. The zero Scope is the whole database.
type Scope struct {
	FirstAccount int64  // the first account id the checks judge; 0: all
	AfterAudit   int64  // audit rows with ids above this
	AfterDay     string // end-of-day days after this one (YYYY-MM-DD); "": all
}

// Prefilled says the database holds a history the soak did not write.
func (sc Scope) Prefilled() bool { return sc.FirstAccount > 0 }

// afterDay is AfterDay as a bound every date passes when it is empty.
func (sc Scope) afterDay() string {
	if sc.AfterDay == "" {
		return "1000-01-01"
	}
	return sc.AfterDay
}

// Snapshot is every row the checks read, from one REPEATABLE READ read-only transaction, so
// the figures of one check agree with each other.
type Snapshot struct {
	Scope       Scope
	Taken       time.Time
	DBNow       time.Time // UTC_TIMESTAMP(3) in the snapshot: the database clock the desk's times are on
	Accounts    []dbAccount
	Deals       []dbDeal
	Positions   []dbPosition
	Orders      []dbOrder
	Triggers    []dbTriggerOrder // STOP_LIMIT orders and OCO legs (check_orders_trig.go)
	Charges     []dbCharge
	Instruments map[string]dbInstrument
	// Groups is each account group's negative balance protection; Audits the audit log.
	Groups map[string]bool
	// Modes is each account group's execution mode (INTERNAL, EXTERNAL); StopOutLevels its
	// stop-out level now (percent).
	Modes         map[string]string
	StopOutLevels map[string]decimal.Decimal
	// PositionModes is each account group's position mode (HEDGING, NETTING, FIFO).
	PositionModes map[string]string
	Audits        []dbAudit
	// Events is the events outbox, in id order.
	Events []dbEvent
	// Rules are the routing rules, by group, priority and id (the order they are asked in).
	Rules []dbRule
	// Hedges and HedgeOrders are the desk's hedge book (fx_hedge_position, fx_hedge_order).
	Hedges      []dbHedge
	HedgeOrders []dbHedgeOrder
	// HedgeLimits are the hedger's net exposure limits in lots, by symbol (fxHedgeLimitLots.*,
	// "off" left out).
	HedgeLimits map[string]decimal.Decimal
	// EOD is the end of day's tables; Overridden the account groups with a symbol override now;
	// Alerts the alert inbox's rows whose code starts with "eod-".
	EOD        EOD
	Overridden map[string]bool
	Alerts     []dbAlert
	// FIXExecutions and FIXAllocations are the FIX journal's executions (fx_fix_execution, in id
	// order) and each one's shares of the desk's trades (fx_fix_allocation); empty on REST.
	FIXExecutions  []dbFIXExecution
	FIXAllocations []dbFIXAllocation
	// HedgeFills are the hedge orders the venue filled, with their prices; Candles the M1 candles
	// (fx_candle) by candleKey, CandlesRead false (and CandlesErr why) when the table could not
	// be read — the price lane's evidence (check_prices.go).
	HedgeFills  []dbHedgeFill
	Candles     map[string]dbCandle
	CandlesRead bool
	CandlesErr  string
	// Policies are the MARKET orders with a price bound or IOC/FOK (check_orders_bound.go).
	Policies []dbPolicy
	// Prefilled is the history's ledger, outside the scope: how many accounts and deals, and
	// the accounts whose balance is not Σ their deals or not their last deal's balanceAfter
	// (PrefilledLedger).
	// BookLots is the history's open INTERNAL positions as the hedger counts them, in lots by
	// symbol (the desk's side: traders net long 2 lots is −2): the hedger nets the whole book.
	Prefilled struct {
		Accounts, Deals int64
		Broken          []dbLedgerBreak
		BookLots        map[string]decimal.Decimal
	}
}

// dbLedgerBreak is an account whose balance disagrees with its deals.
type dbLedgerBreak struct {
	Account                 int64
	Balance, Sum, LastAfter decimal.Decimal
	Deals                   int64
}

// dbAlert is one row of the alert inbox.
type dbAlert struct {
	Code, Status, Message string
	FirstSeen             time.Time
}

// dbRule is one routing rule; UsesProfile says it has a profile condition, which the snapshot
// cannot judge after the fact (the profile moved on since the order).
type dbRule struct {
	ID                   int64
	Group, Action        string
	Accounts, Symbols    sql.NullString // JSON arrays
	VolumeMin, VolumeMax decimal.NullDecimal
	UsesProfile          bool
}

type dbAccount struct {
	ID        int64
	User      int64
	Group     string
	Currency  string
	Balance   decimal.Decimal
	CreatedAt time.Time
	// MarginCalled: the desk records the account in margin call (marginCallAt set).
	MarginCalled bool
}

// dbEvent is one row of fx_event, its payload as written.
type dbEvent struct {
	ID, Account, User int64
	Type              string
	Payload           string
	CreatedAt         time.Time // on the database's clock, as the transaction wrote it, just before COMMIT
}

// dbAudit is one row of fx_audit; Before and After only for the rows that change how an
// account is marked (account.move, account_group.*), which the stopOutTerms invariant replays.
type dbAudit struct {
	ID                   int64
	At                   time.Time // on the database's clock, when the row was inserted (before its commit)
	Via, Action          string
	EntityType, EntityID string
	RequestID            sql.NullString
	Before, After        sql.NullString
}

type dbDeal struct {
	ID, Account  int64
	Type         string
	Amount       decimal.Decimal
	BalanceAfter decimal.Decimal
	Position     sql.NullInt64
	Symbol       sql.NullString
	Volume       decimal.NullDecimal
	Price        decimal.NullDecimal
	Key, Comment string
	CreatedAt    time.Time
}

type dbPosition struct {
	ID, Account, Order int64
	Symbol, Side       string
	Volume, OpenVolume decimal.Decimal
	OpenPrice          decimal.Decimal
	Status             string
	OpenedAt           time.Time
	ClosedAt           sql.NullTime
	SwapThrough        sql.NullTime
	VenueTradeID       sql.NullString // linked EXTERNAL position: its venue trade
	CloseReason        sql.NullString
}

type dbOrder struct {
	ID, Account int64
	Type        string // MARKET, LIMIT, STOP
	Nonce       sql.NullString
	Status      string
	Execution   string       // INTERNAL or EXTERNAL
	SentAt      sql.NullTime // EXTERNAL: when its SENDING row was written
	Symbol      string
	Volume      decimal.Decimal
	RouteRule   sql.NullInt64 // the routing rule that routed it; NULL: its group's default
}

type dbCharge struct {
	Position int64
	Date     string
	Status   string
}

type dbInstrument struct {
	Contract, Point, SwapLong, SwapShort decimal.Decimal
	Markup                               decimal.Decimal // the symbol group's markup, in points
	Base, Quote                          string
}

// ReadSnapshot reads the rows in scope (the zero Scope: every row) in one transaction.
func ReadSnapshot(ctx context.Context, db *sql.DB, scope Scope) (*Snapshot, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin snapshot: %w", err)
	}
	defer tx.Rollback()
	s := &Snapshot{Scope: scope, Taken: time.Now(), Instruments: map[string]dbInstrument{}, Groups: map[string]bool{}, Modes: map[string]string{}, StopOutLevels: map[string]decimal.Decimal{}, PositionModes: map[string]string{}, HedgeLimits: map[string]decimal.Decimal{},
		Overridden: map[string]bool{}}
	if err := tx.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(3)").Scan(&s.DBNow); err != nil {
		return nil, fmt.Errorf("database clock: %w", err)
	}
	first := scope.FirstAccount
	steps := []struct {
		q    string
		args []any
		each func(*sql.Rows) error
	}{
		{"SELECT `id`, `userId`, `accountGroup`, `currency`, `balance`, `createdAt`, `marginCallAt` IS NOT NULL FROM `fx_account` WHERE `id` >= ? ORDER BY `id`", []any{first}, func(r *sql.Rows) error {
			var a dbAccount
			err := r.Scan(&a.ID, &a.User, &a.Group, &a.Currency, &a.Balance, &a.CreatedAt, &a.MarginCalled)
			s.Accounts = append(s.Accounts, a)
			return err
		}},
		{"SELECT `id`, `accountId`, `type`, `amount`, `balanceAfter`, `positionId`, `symbol`, `volume`, `price`, `idempotencyKey`, `comment`, `createdAt` FROM `fx_deal` WHERE `accountId` >= ? ORDER BY `accountId`, `id`", []any{first}, func(r *sql.Rows) error {
			var d dbDeal
			err := r.Scan(&d.ID, &d.Account, &d.Type, &d.Amount, &d.BalanceAfter, &d.Position, &d.Symbol, &d.Volume, &d.Price, &d.Key, &d.Comment, &d.CreatedAt)
			s.Deals = append(s.Deals, d)
			return err
		}},
		{"SELECT `id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `openedAt`, `closedAt`, `swapThrough`, `venueTradeId`, `closeReason` FROM `fx_position` WHERE `accountId` >= ? ORDER BY `id`", []any{first}, func(r *sql.Rows) error {
			var p dbPosition
			err := r.Scan(&p.ID, &p.Account, &p.Order, &p.Symbol, &p.Side, &p.Volume, &p.OpenVolume, &p.OpenPrice, &p.Status, &p.OpenedAt, &p.ClosedAt, &p.SwapThrough, &p.VenueTradeID, &p.CloseReason)
			s.Positions = append(s.Positions, p)
			return err
		}},
		{"SELECT `id`, `accountId`, `type`, `requestNonce`, `status`, `execution`, `sentAt`, `symbol`, `volume`, `routeRuleId` FROM `fx_order` WHERE `accountId` >= ? ORDER BY `id`", []any{first}, func(r *sql.Rows) error {
			var o dbOrder
			err := r.Scan(&o.ID, &o.Account, &o.Type, &o.Nonce, &o.Status, &o.Execution, &o.SentAt, &o.Symbol, &o.Volume, &o.RouteRule)
			s.Orders = append(s.Orders, o)
			return err
		}},
		{triggerOrdersSQL, []any{first}, scanTriggerOrder(s)},
		{"SELECT `positionId`, `rolloverDate`, `status` FROM `fx_swap_charge` WHERE ? = 0 OR `positionId` IN (SELECT `id` FROM `fx_position` WHERE `accountId` >= ?)", []any{first, first}, func(r *sql.Rows) error {
			var c dbCharge
			var d time.Time
			err := r.Scan(&c.Position, &d, &c.Status)
			c.Date = d.Format("2006-01-02")
			s.Charges = append(s.Charges, c)
			return err
		}},
		{"SELECT i.`symbol`, i.`contractSize`, i.`point`, i.`swapLong`, i.`swapShort`, i.`base`, i.`quote`, COALESCE(g.`markupPoints`, 0) " +
			"FROM `fx_instrument` i LEFT JOIN `fx_symbol_group` g ON g.`name` = i.`symbolGroup`", nil, func(r *sql.Rows) error {
			var sym string
			var in dbInstrument
			err := r.Scan(&sym, &in.Contract, &in.Point, &in.SwapLong, &in.SwapShort, &in.Base, &in.Quote, &in.Markup)
			s.Instruments[sym] = in
			return err
		}},
		{"SELECT `name`, `negativeBalanceProtection`, `executionMode`, `stopOutLevel`, `positionMode` FROM `fx_account_group`", nil, func(r *sql.Rows) error {
			var name, mode, positionMode string
			var nbp bool
			var level decimal.Decimal
			err := r.Scan(&name, &nbp, &mode, &level, &positionMode)
			s.Groups[name], s.Modes[name], s.StopOutLevels[name] = nbp, mode, level
			s.PositionModes[name] = positionMode
			return err
		}},
		{"SELECT `id`, `at`, `actorVia`, `action`, `entityType`, `entityId`, `requestId`, " +
			"CASE WHEN `action` = 'account.move' OR `entityType` = 'account_group' THEN `before` END, " +
			"CASE WHEN `action` = 'account.move' OR `entityType` = 'account_group' THEN `after` END FROM `fx_audit` WHERE `id` > ? ORDER BY `id`", []any{scope.AfterAudit}, func(r *sql.Rows) error {
			var a dbAudit
			err := r.Scan(&a.ID, &a.At, &a.Via, &a.Action, &a.EntityType, &a.EntityID, &a.RequestID, &a.Before, &a.After)
			s.Audits = append(s.Audits, a)
			return err
		}},
		{"SELECT `id`, `accountGroup`, `action`, `accounts`, `symbols`, `volumeMin`, `volumeMax`, " +
			"`minTrades` IS NOT NULL OR `profitFactorMin` IS NOT NULL OR `winRateMin` IS NOT NULL OR `avgHoldSecondsMax` IS NOT NULL OR `underMinuteShareMin` IS NOT NULL " +
			"FROM `fx_routing_rule` ORDER BY `accountGroup`, `priority`, `id`", nil, func(r *sql.Rows) error {
			var u dbRule
			err := r.Scan(&u.ID, &u.Group, &u.Action, &u.Accounts, &u.Symbols, &u.VolumeMin, &u.VolumeMax, &u.UsesProfile)
			s.Rules = append(s.Rules, u)
			return err
		}},
		{policiesSQL, []any{first}, func(r *sql.Rows) error {
			var o dbPolicy
			err := r.Scan(&o.ID, &o.Side, &o.TimeInForce, &o.Status, &o.Volume, &o.PriceBound, &o.FilledVolume, &o.FillPrice)
			s.Policies = append(s.Policies, o)
			return err
		}},
		{"SELECT `id`, `orderId`, `symbol`, `units`, `venueTradeId`, `status`, `closePrice`, COALESCE(`clientPositionId`, 0), `openPrice`, COALESCE(`closeReason`, ''), `realizedPl` FROM `fx_hedge_position` ORDER BY `id`", nil, func(r *sql.Rows) error {
			var h dbHedge
			err := r.Scan(&h.ID, &h.Order, &h.Symbol, &h.Units, &h.TradeID, &h.Status, &h.ClosePrice, &h.ClientPosition, &h.OpenPrice, &h.CloseReason, &h.RealizedPL)
			s.Hedges = append(s.Hedges, h)
			return err
		}},
		{"SELECT `name`, `value` FROM `fx_setting` WHERE `name` LIKE 'fxHedgeLimitLots.%'", nil, func(r *sql.Rows) error {
			var name, value string
			if err := r.Scan(&name, &value); err != nil {
				return err
			}
			if lots, err := decimal.NewFromString(value); err == nil {
				s.HedgeLimits[strings.TrimPrefix(name, "fxHedgeLimitLots.")] = lots
			}
			return nil
		}},
		{"SELECT `id`, `status`, `sentAt`, COALESCE(`fillUnits`, `units`), COALESCE(`reducesPositionId`, 0) FROM `fx_hedge_order` ORDER BY `id`", nil, func(r *sql.Rows) error {
			var o dbHedgeOrder
			err := r.Scan(&o.ID, &o.Status, &o.SentAt, &o.Units, &o.Reduces)
			s.HedgeOrders = append(s.HedgeOrders, o)
			return err
		}},
		{"SELECT `id`, `accountId`, `userId`, `type`, `payload`, `createdAt` FROM `fx_event` WHERE `accountId` >= ? ORDER BY `id`", []any{first}, func(r *sql.Rows) error {
			var e dbEvent
			err := r.Scan(&e.ID, &e.Account, &e.User, &e.Type, &e.Payload, &e.CreatedAt)
			s.Events = append(s.Events, e)
			return err
		}},
		{"SELECT DISTINCT `accountGroup` FROM `fx_symbol_override`", nil, func(r *sql.Rows) error {
			var g string
			err := r.Scan(&g)
			s.Overridden[g] = true
			return err
		}},
		{"SELECT `id`, `execId`, `clOrdId`, `symbol`, `units`, `price`, `transactTime` FROM `fx_fix_execution` ORDER BY `id`", nil, func(r *sql.Rows) error {
			var e dbFIXExecution
			err := r.Scan(&e.ID, &e.ExecID, &e.ClOrdID, &e.Symbol, &e.Units, &e.Price, &e.At)
			s.FIXExecutions = append(s.FIXExecutions, e)
			return err
		}},
		{"SELECT `executionId`, `tradeId`, `units` FROM `fx_fix_allocation` ORDER BY `executionId`, `tradeId`", nil, func(r *sql.Rows) error {
			var a dbFIXAllocation
			err := r.Scan(&a.Execution, &a.Trade, &a.Units)
			s.FIXAllocations = append(s.FIXAllocations, a)
			return err
		}},
		{"SELECT `code`, `status`, `message`, `firstSeenAt` FROM `fx_execution_alert` WHERE `code` LIKE 'eod-%' ORDER BY `id`", nil, func(r *sql.Rows) error {
			var a dbAlert
			err := r.Scan(&a.Code, &a.Status, &a.Message, &a.FirstSeen)
			s.Alerts = append(s.Alerts, a)
			return err
		}},
	}
	for _, st := range steps {
		if err := scanRows(ctx, tx, st.q, st.each, st.args...); err != nil {
			return nil, err
		}
	}
	e, err := readEOD(ctx, tx, scope)
	if err != nil {
		return nil, err
	}
	s.EOD = *e
	readPrices(ctx, tx, s)
	if scope.Prefilled() {
		if err := readPrefilledLedger(ctx, tx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// prefilledLedgerSQL finds the accounts before the scope whose balance is not Σ their deals, or
// not the balanceAfter of their last deal: one pass over the history's deals by account.
const prefilledLedgerSQL = "SELECT a.`id`, a.`balance`, COALESCE(d.`total`, 0), COALESCE(l.`balanceAfter`, 0), COALESCE(d.`n`, 0) " +
	"FROM `fx_account` a LEFT JOIN (SELECT `accountId`, SUM(`amount`) AS `total`, MAX(`id`) AS `lastId`, COUNT(*) AS `n` FROM `fx_deal` " +
	"WHERE `accountId` < ? GROUP BY `accountId`) d ON d.`accountId` = a.`id` LEFT JOIN `fx_deal` l ON l.`id` = d.`lastId` " +
	"WHERE a.`id` < ? AND (a.`balance` <> COALESCE(d.`total`, 0) OR a.`balance` <> COALESCE(l.`balanceAfter`, 0))"

// readPrefilledLedger reads the history's ledger outside the scope as sums (PrefilledLedger).
func readPrefilledLedger(ctx context.Context, tx *sql.Tx, s *Snapshot) error {
	first := s.Scope.FirstAccount
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_account` WHERE `id` < ?", first).Scan(&s.Prefilled.Accounts); err != nil {
		return fmt.Errorf("history's accounts: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` < ?", first).Scan(&s.Prefilled.Deals); err != nil {
		return fmt.Errorf("history's deals: %w", err)
	}
	if err := scanRows(ctx, tx, prefilledLedgerSQL, func(r *sql.Rows) error {
		var b dbLedgerBreak
		err := r.Scan(&b.Account, &b.Balance, &b.Sum, &b.LastAfter, &b.Deals)
		s.Prefilled.Broken = append(s.Prefilled.Broken, b)
		return err
	}, first, first); err != nil {
		return err
	}
	s.Prefilled.BookLots = map[string]decimal.Decimal{}
	return scanRows(ctx, tx, "SELECT p.`symbol`, p.`side`, SUM(p.`volume`) FROM `fx_position` p JOIN `fx_order` o ON o.`id` = p.`orderId` "+
		"WHERE p.`accountId` < ? AND p.`status` = 'OPEN' AND o.`execution` = 'INTERNAL' GROUP BY p.`symbol`, p.`side`", func(r *sql.Rows) error {
		var sym, side string
		var lots decimal.Decimal
		err := r.Scan(&sym, &side, &lots)
		if side == "BUY" {
			lots = lots.Neg()
		}
		s.Prefilled.BookLots[sym] = s.Prefilled.BookLots[sym].Add(lots)
		return err
	}, first)
}

// scanRows runs q with args in tx and hands each row to each; an error names the query.
func scanRows(ctx context.Context, tx *sql.Tx, q string, each func(*sql.Rows) error, args ...any) error {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return rows.Err()
}
