package book

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/store"
)

// Account is one row of fx_account.
type Account struct {
	ID         int64
	UserID     int64
	Group      string
	Currency   string
	Leverage   int
	Balance    decimal.Decimal
	Equity     decimal.Decimal
	UsedMargin decimal.Decimal
	MarkedAt   *time.Time
	CreatedAt  time.Time
	// Execution is the account group's routing, read with the account (in a batch: under its
	// lock), so a mode switch applies to the next batch, not after a catalog refresh.
	Execution fx.ExecutionMode
	// State is what an admin lets the account do (ACTIVE, CLOSE_ONLY, DISABLED), StateReason
	// why; read under the account's lock, so a change applies to the next write.
	State       fx.AccountState
	StateReason *string
}

// Order is one row of fx_order, with the position it opened (if any).
type Order struct {
	ID           int64
	AccountID    int64
	Symbol       string
	Side         fx.Side
	Type         fx.OrderType
	Volume       decimal.Decimal
	Price        *decimal.Decimal
	SL, TP       *decimal.Decimal
	TimeInForce  fx.TimeInForce
	ExpiresAt    *time.Time
	Status       string
	RequestNonce *string
	// RequestHash is the fingerprint of the request its nonce binds (OrderRequest.fingerprint);
	// nil without a nonce, or on an order written before the desk kept it.
	RequestHash *string
	FillPrice   *decimal.Decimal
	PositionID  *int64
	CreatedAt   time.Time
	// Execution is INTERNAL (filled by the desk) or EXTERNAL (sent to the venue, client id =
	// the order's id); SentAt, VenueOrderID and VenueReason are set on EXTERNAL orders only.
	Execution fx.ExecutionMode
	// RouteRuleID is the routing rule that decided Execution at acceptance; nil when the
	// account group's execution mode did (docs/routing.md).
	RouteRuleID *int64
	// HedgePercent is the share of the order a HEDGE routing rule opens at the venue in the
	// desk's hedge book once it fills (internal/hedge); nil for every other order.
	HedgePercent *int
	SentAt       *time.Time
	VenueOrderID *string
	VenueReason  *string
	// The orders traders expect (migration 000032, docs/orders.md): a STOP_LIMIT's limit and the
	// moment its stop triggered, a MARKET order's price bound, the part an IOC filled at the
	// venue, the other leg of an OCO pair, the trailing stop its position gets, the last modify.
	LimitPrice    *decimal.Decimal
	TriggeredAt   *time.Time
	PriceBound    *decimal.Decimal
	FilledVolume  *decimal.Decimal
	OCOOrderID    *int64
	TrailDistance *decimal.Decimal
	ModifiedAt    *time.Time
}

// Position is one row of fx_position.
type Position struct {
	ID             int64
	AccountID      int64
	OrderID        int64
	Symbol         string
	Side           fx.Side
	Volume         decimal.Decimal
	OpenVolume     decimal.Decimal
	OpenPrice      decimal.Decimal
	SL, TP         *decimal.Decimal
	Commission     decimal.Decimal
	RealizedProfit decimal.Decimal
	Status         string
	ClosePrice     *decimal.Decimal
	CloseReason    *string
	OpenedAt       time.Time
	ClosedAt       *time.Time
	// Currency is the account's: the currency of Commission and RealizedProfit.
	Currency string
	// VenueTradeID links an EXTERNAL position to its venue trade; nil on INTERNAL positions.
	VenueTradeID *string
	// TrailDistance and TrailLevel are its trailing stop (docs/orders.md «Trailing stops»): the
	// distance in price units and the level the holder last stored; nil without one.
	TrailDistance, TrailLevel *decimal.Decimal
}

// Deal is one row of the ledger; the ledger package writes it.
type Deal = ledger.Deal

type Querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// scanner is a row to scan: *sql.Row or *sql.Rows.
const AccountCols = "`id`, `userId`, `accountGroup`, `currency`, `leverage`, `balance`, `equity`, `usedMargin`, `markedAt`, `createdAt`, `state`, `stateReason`, " +
	"(SELECT g.`executionMode` FROM `fx_account_group` g WHERE g.`name` = `fx_account`.`accountGroup` LIMIT 1)"

func ScanAccount(sc store.Scanner) (Account, error) {
	var a Account
	err := sc.Scan(&a.ID, &a.UserID, &a.Group, &a.Currency, &a.Leverage, &a.Balance, &a.Equity, &a.UsedMargin, &a.MarkedAt, &a.CreatedAt, &a.State, &a.StateReason, &a.Execution)
	return a, err
}

// LoadAccount reads account id owned by userID (0 = any owner), without a lock (a write takes
// it with lockAccountSQL in its first batch). It returns ENOTFOUND when there is no such account
// or it belongs to someone else.
func LoadAccount(ctx context.Context, q Querier, userID, id int64) (Account, error) {
	a, err := ScanAccount(q.QueryRowContext(ctx, "SELECT "+AccountCols+" FROM `fx_account` WHERE `id` = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, AccountNotFound(id)
	}
	if err != nil {
		return Account{}, fmt.Errorf("load account %d: %w", id, err)
	}
	return a, OwnedBy(a, true, userID, id)
}

// LockAccountSQL takes account ? for update. Every fill, close and balance change takes the
// account row first, then the rows it changes.
const LockAccountSQL = "SELECT " + AccountCols + " FROM `fx_account` WHERE `id` = ? FOR UPDATE"

// RowInto is the batch scan of at most one row, read by scan into *v.
func RowInto[T any](v *T, found *bool, scan func(store.Scanner) (T, error)) func(*sql.Rows) error {
	return ScanFirst(found, func(r *sql.Rows) (err error) {
		*v, err = scan(r)
		return err
	})
}

// OwnedBy is ENOTFOUND unless account id was found and belongs to userID (0 = any owner).
func OwnedBy(a Account, found bool, userID, id int64) error {
	if !found || (userID != 0 && a.UserID != userID) {
		return AccountNotFound(id)
	}
	return nil
}

func AccountNotFound(id int64) error { return fx.Errorf(fx.ENOTFOUND, "Account %d not found.", id) }

func ListAccounts(ctx context.Context, q Querier, userID int64, limit int) ([]Account, error) {
	sqlText := "SELECT " + AccountCols + " FROM `fx_account`"
	args := []any{}
	if userID != 0 {
		sqlText += " WHERE `userId` = ?"
		args = append(args, userID)
	}
	sqlText += " ORDER BY `id` LIMIT ?"
	args = append(args, limit)
	return store.QueryAll(ctx, q, "list accounts", ScanAccount, sqlText, args...)
}

// PageAccounts reads a page of every user's accounts, newest first: ids below before (0: from
// the newest), at most limit of them, on the primary key (the dealer's list).
func PageAccounts(ctx context.Context, q Querier, before int64, limit int) ([]Account, error) {
	if before > 0 {
		return store.QueryAll(ctx, q, "page accounts", ScanAccount,
			"SELECT "+AccountCols+" FROM `fx_account` WHERE `id` < ? ORDER BY `id` DESC LIMIT ?", before, limit)
	}
	return store.QueryAll(ctx, q, "page accounts", ScanAccount, "SELECT "+AccountCols+" FROM `fx_account` ORDER BY `id` DESC LIMIT ?", limit)
}

// ExposuresSQL sums account ?'s open positions per symbol and side.
const ExposuresSQL = "SELECT `symbol`, `side`, SUM(`volume`), SUM(`volume` * `openPrice`) FROM `fx_position` " +
	"WHERE `accountId` = ? AND `status` = 'OPEN' GROUP BY `symbol`, `side` ORDER BY `symbol`, `side`"

// LoadExposures sums an account's open positions per symbol and side.
func LoadExposures(ctx context.Context, q Querier, accountID int64) ([]Exposure, error) {
	rows, err := q.QueryContext(ctx, ExposuresSQL, accountID)
	if err != nil {
		return nil, fmt.Errorf("load exposures of account %d: %w", accountID, err)
	}
	defer rows.Close()
	var out []Exposure
	if err := ExposuresInto(&out)(rows); err != nil {
		return nil, fmt.Errorf("load exposures of account %d: %w", accountID, err)
	}
	return out, rows.Err()
}

// LoadExposuresOf sums the open positions of each of accounts per symbol and side, in one
// statement: the account list marks every account it shows as the single read marks one. An
// account without open positions has no entry.
func LoadExposuresOf(ctx context.Context, q Querier, accounts []int64) (map[int64][]Exposure, error) {
	out := make(map[int64][]Exposure, len(accounts))
	if len(accounts) == 0 {
		return out, nil
	}
	// On the exposure index by name: it holds each account's open positions in the order of the
	// grouping, so a page of accounts reads theirs alone, without a sort. Left to itself the
	// optimiser may read every open position of the desk when the page is much of the accounts.
	rows, err := q.QueryContext(ctx, "SELECT `accountId`, `symbol`, `side`, SUM(`volume`), SUM(`volume` * `openPrice`) FROM `fx_position` FORCE INDEX (`idx_fx_position_exposure`) "+
		"WHERE `accountId` IN ("+store.Placeholders(len(accounts))+") AND `status` = 'OPEN' GROUP BY `accountId`, `symbol`, `side` ORDER BY `accountId`, `symbol`, `side`", store.Int64Args(accounts)...)
	if err != nil {
		return nil, fmt.Errorf("load exposures of %d accounts: %w", len(accounts), err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var e Exposure
		if err := rows.Scan(&id, &e.Symbol, &e.Side, &e.Volume, &e.VolumePrice); err != nil {
			return nil, fmt.Errorf("load exposures of %d accounts: %w", len(accounts), err)
		}
		out[id] = append(out[id], e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load exposures of %d accounts: %w", len(accounts), err)
	}
	return out, nil
}

// ExposuresInto is the batch scan of exposuresSQL.
func ExposuresInto(out *[]Exposure) func(*sql.Rows) error {
	return func(rows *sql.Rows) error {
		*out = (*out)[:0]
		for rows.Next() {
			var e Exposure
			if err := rows.Scan(&e.Symbol, &e.Side, &e.Volume, &e.VolumePrice); err != nil {
				return err
			}
			*out = append(*out, e)
		}
		return nil
	}
}

const OrderCols = "o.`id`, o.`accountId`, o.`symbol`, o.`side`, o.`type`, o.`volume`, o.`price`, o.`sl`, o.`tp`, o.`timeInForce`, " +
	"o.`expiresAt`, o.`status`, o.`requestNonce`, o.`fillPrice`, " +
	"(SELECT p.`id` FROM `fx_position` p WHERE p.`orderId` = o.`id` LIMIT 1), o.`createdAt`, " +
	"o.`execution`, o.`sentAt`, o.`venueOrderId`, o.`venueReason`, o.`requestHash`, o.`routeRuleId`, o.`hedgePercent`, " +
	"o.`limitPrice`, o.`triggeredAt`, o.`priceBound`, o.`filledVolume`, o.`ocoOrderId`, o.`trailDistance`, o.`modifiedAt`"

func ScanOrder(sc store.Scanner) (Order, error) {
	var o Order
	err := sc.Scan(&o.ID, &o.AccountID, &o.Symbol, &o.Side, &o.Type, &o.Volume, &o.Price, &o.SL, &o.TP, &o.TimeInForce,
		&o.ExpiresAt, &o.Status, &o.RequestNonce, &o.FillPrice, &o.PositionID, &o.CreatedAt,
		&o.Execution, &o.SentAt, &o.VenueOrderID, &o.VenueReason, &o.RequestHash, &o.RouteRuleID, &o.HedgePercent,
		&o.LimitPrice, &o.TriggeredAt, &o.PriceBound, &o.FilledVolume, &o.OCOOrderID, &o.TrailDistance, &o.ModifiedAt)
	return o, err
}

// NonceSQL finds account ?'s order with request nonce ?.
const NonceSQL = "SELECT " + OrderCols + " FROM `fx_order` o WHERE o.`accountId` = ? AND o.`requestNonce` = ?"

func LoadOrderByNonce(ctx context.Context, q Querier, accountID int64, nonce string) (Order, bool, error) {
	o, err := ScanOrder(q.QueryRowContext(ctx, NonceSQL, accountID, nonce))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, false, nil
	}
	if err != nil {
		return Order{}, false, fmt.Errorf("look up request nonce: %w", err)
	}
	return o, true, nil
}

// LoadOrder reads order id if it belongs to one of userID's accounts (ENOTFOUND otherwise).
func LoadOrder(ctx context.Context, q Querier, userID, id int64) (Order, error) {
	o, err := ScanOrder(q.QueryRowContext(ctx, "SELECT "+OrderCols+" FROM `fx_order` o JOIN `fx_account` a ON a.`id` = o.`accountId` "+
		"WHERE o.`id` = ? AND a.`userId` = ?", id, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, fx.Errorf(fx.ENOTFOUND, "Order %d not found.", id)
	}
	if err != nil {
		return Order{}, fmt.Errorf("load order %d: %w", id, err)
	}
	return o, nil
}

// ListOrders reads a page of userID's orders as f asks, newest first (ListPage).
func ListOrders(ctx context.Context, q Querier, userID int64, f ListFilter) ([]Order, error) {
	return listPage(ctx, q, "list orders", ScanOrder, userID, f, OrderCols, "`fx_order` o", "o", "idx_fx_order_account_list", "idx_fx_order_account_id")
}

const PositionCols = positionOwnCols + "(SELECT c.`currency` FROM `fx_account` c WHERE c.`id` = p.`accountId`), p.`venueTradeId`, p.`trailDistance`, p.`trailLevel`"

// lockedPositionCols is PositionCols for a batch that locks the positions' accounts in the same
// round trip: the currency is the locked account's (Rows.add), not a subquery per position —
// which cost a 256-close batch's lock read three quarters of its time.
const lockedPositionCols = positionOwnCols + "'', p.`venueTradeId`, p.`trailDistance`, p.`trailLevel`"

const positionOwnCols = "p.`id`, p.`accountId`, p.`orderId`, p.`symbol`, p.`side`, p.`volume`, p.`openVolume`, p.`openPrice`, p.`sl`, p.`tp`, " +
	"p.`commission`, p.`realizedProfit`, p.`status`, p.`closePrice`, p.`closeReason`, p.`openedAt`, p.`closedAt`, "

func ScanPosition(sc store.Scanner) (Position, error) {
	var p Position
	err := sc.Scan(&p.ID, &p.AccountID, &p.OrderID, &p.Symbol, &p.Side, &p.Volume, &p.OpenVolume, &p.OpenPrice, &p.SL, &p.TP,
		&p.Commission, &p.RealizedProfit, &p.Status, &p.ClosePrice, &p.CloseReason, &p.OpenedAt, &p.ClosedAt, &p.Currency, &p.VenueTradeID,
		&p.TrailDistance, &p.TrailLevel)
	return p, err
}

// LoadPosition reads position id, without a lock; userID 0 means any owner.
func LoadPosition(ctx context.Context, q Querier, userID, id int64) (Position, error) {
	sqlText := "SELECT " + PositionCols + " FROM `fx_position` p WHERE p.`id` = ?"
	args := []any{id}
	if userID != 0 {
		sqlText = "SELECT " + PositionCols + " FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` WHERE p.`id` = ? AND a.`userId` = ?"
		args = append(args, userID)
	}
	p, err := ScanPosition(q.QueryRowContext(ctx, sqlText, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Position{}, fx.Errorf(fx.ENOTFOUND, "Position %d not found.", id)
	}
	if err != nil {
		return Position{}, fmt.Errorf("load position %d: %w", id, err)
	}
	return p, nil
}

// ListPositions reads a page of userID's positions as f asks, newest first (ListPage).
func ListPositions(ctx context.Context, q Querier, userID int64, f ListFilter) ([]Position, error) {
	return listPage(ctx, q, "list positions", ScanPosition, userID, f, PositionCols, "`fx_position` p", "p", "idx_fx_position_account_list", "idx_fx_position_account_id")
}

// DealCols are the columns of fx_deal d that ScanDeal reads, in its order.
const DealCols = "d.`id`, d.`accountId`, d.`type`, d.`amount`, d.`balanceAfter`, d.`currency`, d.`orderId`, d.`positionId`, d.`symbol`, " +
	"d.`side`, d.`volume`, d.`price`, d.`idempotencyKey`, d.`comment`, d.`createdAt`"

func ScanDeal(sc store.Scanner) (Deal, error) {
	var d Deal
	err := sc.Scan(&d.ID, &d.AccountID, &d.Type, &d.Amount, &d.BalanceAfter, &d.Currency, &d.OrderID, &d.PositionID, &d.Symbol,
		&d.Side, &d.Volume, &d.Price, &d.IdempotencyKey, &d.Comment, &d.CreatedAt)
	return d, err
}

// DealByKeySQL finds the deal with idempotency key ?.
const DealByKeySQL = "SELECT " + DealCols + " FROM `fx_deal` d WHERE d.`idempotencyKey` = ?"

func LoadDealByKey(ctx context.Context, q Querier, key string) (Deal, bool, error) {
	d, err := ScanDeal(q.QueryRowContext(ctx, DealByKeySQL, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Deal{}, false, nil
	}
	if err != nil {
		return Deal{}, false, fmt.Errorf("look up deal %q: %w", key, err)
	}
	return d, true, nil
}

// ListDeals reads a page of userID's ledger as f asks (f.Status unused), newest first (ListPage).
func ListDeals(ctx context.Context, q Querier, userID int64, f ListFilter) ([]Deal, error) {
	f.Status = ""
	return listPage(ctx, q, "list deals", ScanDeal, userID, f, DealCols, "`fx_deal` d", "d", "", "idx_fx_deal_account")
}

// CommitDeal ends tx with the balance change d on the locked account a: b (which may already
// hold the writes that come with it), then the ledger's posting of d (with marks, when
// non-nil), the deal's id and COMMIT, in one round trip. It returns the deal as written.
//
// naming, when non-nil, adds the statements that record the new deal's id elsewhere (an approved
// money request's dealId): they run right after the posting, where LAST_INSERT_ID() is the
// deal's id, so they must not move it themselves.
func CommitDeal(ctx context.Context, tx *Txn, b *Batch, a *Account, d Deal, marks *Metrics, naming func(*Batch)) (Deal, error) {
	d, err := addDeal(b, a, d, marks)
	if err != nil {
		return Deal{}, err
	}
	b.Query(LastInsertID(&d.ID), "SELECT LAST_INSERT_ID()")
	if naming != nil {
		naming(b)
	}
	if err := tx.Commit(ctx, b); err != nil {
		return Deal{}, fmt.Errorf("post %s deal for account %d: %w", d.Type, a.ID, err)
	}
	return d, nil
}

// addDeal adds to b the ledger's posting of d on the locked account a — the new balance (with
// marks, when non-nil) and the deal — and returns the deal as it will be written, without its
// id: the deal INSERT is the posting's last statement, so its id is the batch's last insert id.
// a.Balance is moved to the deal's balanceAfter.
func addDeal(b *Batch, a *Account, d Deal, marks *Metrics) (Deal, error) {
	la := &ledger.Account{ID: a.ID, Currency: a.Currency, Balance: a.Balance}
	if marks != nil {
		la.Marks = &ledger.Marks{Equity: marks.Equity, UsedMargin: marks.UsedMargin}
	}
	d.AccountID = a.ID
	p, err := ledger.Post([]*ledger.Account{la}, []Deal{d})
	if err != nil {
		return Deal{}, err
	}
	for _, st := range p.Stmts {
		b.Exec(st.SQL, st.Args...)
	}
	a.Balance = la.Balance
	d = p.Deals[0]
	d.CreatedAt = time.Now().UTC()
	return d, nil
}
