package fix

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Order states in the journal (fx_fix_order.status).
const (
	stateSending  = "SENDING"
	stateNew      = "NEW"
	stateFilled   = "FILLED"
	stateRejected = "REJECTED"
	// stateReserved is a trade's whole close named ahead of its trigger and not sent by this
	// holder (reserve.go); an earlier holder may have sent it. Not pending: nobody asks the venue
	// about it until a close of its trade needs to know.
	stateReserved = "RESERVED"
)

// closeMark separates a close's trade from its own suffix in its ClOrdID: <trade>.c<n>.
const closeMark = ".c"

// Whose execution (docs/fix.md, «Whose execution»). An execution is the desk's only when its
// order is one the desk's journal holds: a row the desk wrote before the send (identity before
// action), with the trade it opens or closes in `tradeId`. No scheme of ClOrdIDs can tell the
// venue's own orders apart: a liquidity provider numbers its orders as it likes — a number equal
// to a desk order id, or no ClOrdID at all. A report whose ClOrdID the journal holds is still
// the venue's own when it contradicts that order: another OrderID than the one the venue gave
// the desk's order, or another symbol or side.
//
// The venue's own order is journaled under a key of the desk's making, venueKeyPrefix and its
// OrderID (which the venue gives each order once), never under the LP's ClOrdID, so that it
// neither shadows a desk order nor collides with the venue's next order of the same (or no)
// ClOrdID, and its `tradeId` is "": its executions are allocated to the desk's open trades in
// the symbol, oldest first.
const venueKeyPrefix = "venue:"

// venueKey is the journal key of the venue's own order r.
func venueKey(r report) string {
	id := r.OrderID
	if id == "" {
		id = "exec:" + r.ExecID // an OrderID is required on a report; without one, each execution stands alone
	}
	return truncate(venueKeyPrefix+id, 64)
}

// ours is whether row (the journal's order under r's ClOrdID) is the order r reports: a desk
// order (written with its trade) that r does not contradict.
func ours(row order, r report) bool {
	switch {
	case row.TradeID == "":
		return false
	case row.VenueOrderID != "" && r.OrderID != "" && row.VenueOrderID != r.OrderID:
		return false
	case r.Symbol != "" && row.Symbol != r.Symbol:
		return false
	case r.Side != "" && row.Side != r.Side:
		return false
	}
	return true
}

// journal is the desk's record of the session's orders and of the executions the venue reported.
type journal struct{ db *sql.DB }

// order is one journal row.
type order struct {
	ClOrdID, TradeID, Symbol, Side, Status string
	Qty, CumQty, AvgPx                     decimal.Decimal
	VenueOrderID, Text                     string
	RejectReason                           int
	SentAt                                 time.Time
	// IOC and Limit are an open's fill policy and price bound (bound.go), as sent; not
	// journaled: they shape the one NewOrderSingle, which is never rebuilt from the journal.
	IOC   bool
	Limit *decimal.Decimal
}

// insertOrdersSQL writes n orders' identities (SENDING) in one statement.
func insertOrdersSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO `fx_fix_order` (`clOrdId`, `tradeId`, `symbol`, `side`, `qty`, `status`) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// insertOrders writes orders' identities before they are sent, in one statement: all of them
// or none. Each is SENDING, or RESERVED when so marked (reserve.go).
func (j *journal) insertOrders(ctx context.Context, os []order) error {
	args := make([]any, 0, 6*len(os))
	for _, o := range os {
		status := stateSending
		if o.Status == stateReserved {
			status = stateReserved
		}
		args = append(args, o.ClOrdID, o.TradeID, o.Symbol, o.Side, o.Qty, status)
	}
	if _, err := j.db.ExecContext(ctx, insertOrdersSQL(len(os)), args...); err != nil {
		if len(os) == 1 {
			return fmt.Errorf("journal order %s: %w", os[0].ClOrdID, err)
		}
		return fmt.Errorf("journal %d orders: %w", len(os), err)
	}
	return nil
}

// deleteOrder removes the identity of an order that provably never reached the session; it
// answers whether the row is gone.
func (j *journal) deleteOrder(ctx context.Context, clOrdID string) bool {
	_, err := j.db.ExecContext(ctx, "DELETE FROM `fx_fix_order` WHERE `clOrdId` = ? AND `status` = ?", clOrdID, stateSending)
	return err == nil
}

func (j *journal) order(ctx context.Context, clOrdID string) (order, bool, error) {
	var o order
	var vid, text sql.NullString
	var rej sql.NullInt64
	err := j.db.QueryRowContext(ctx, "SELECT `clOrdId`, `tradeId`, `symbol`, `side`, `status`, `qty`, `cumQty`, `avgPx`, `venueOrderId`, `text`, `rejectReason`, `sentAt` FROM `fx_fix_order` WHERE `clOrdId` = ?", clOrdID).
		Scan(&o.ClOrdID, &o.TradeID, &o.Symbol, &o.Side, &o.Status, &o.Qty, &o.CumQty, &o.AvgPx, &vid, &text, &rej, &o.SentAt)
	if errors.Is(err, sql.ErrNoRows) {
		return order{}, false, nil
	}
	if err != nil {
		return order{}, false, fmt.Errorf("journal read order %s: %w", clOrdID, err)
	}
	o.VenueOrderID, o.Text, o.RejectReason = vid.String, text.String, int(rej.Int64)
	return o, true, nil
}

// endUnsent ends an order the venue answered it never saw (REJECTED, nothing executed), so that
// it no longer holds its trade's closes back.
func (j *journal) endUnsent(ctx context.Context, clOrdID string) error {
	_, err := j.db.ExecContext(ctx, "UPDATE `fx_fix_order` SET `status` = ?, `text` = ? WHERE `clOrdId` = ? AND `status` = ? AND `cumQty` = 0",
		stateRejected, "the venue never saw it", clOrdID, stateSending)
	if err != nil {
		return fmt.Errorf("journal end unsent order %s: %w", clOrdID, err)
	}
	return nil
}

// pending is every desk order still SENDING or NEW whose last word is older than age (the venue's
// own orders are not asked about: the desk cannot name them to the venue).
func (j *journal) pending(ctx context.Context, age time.Duration) ([]order, error) {
	rows, err := j.db.QueryContext(ctx, "SELECT `clOrdId`, `symbol`, `side` FROM `fx_fix_order` WHERE `status` IN (?, ?) AND `tradeId` <> '' AND `updatedAt` < NOW(3) - INTERVAL ? MICROSECOND ORDER BY `clOrdId`",
		stateSending, stateNew, age.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("journal pending orders: %w", err)
	}
	defer rows.Close()
	var out []order
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.ClOrdID, &o.Symbol, &o.Side); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// signed is qty with the sign of side (1 buy: positive).
func signed(side string, qty decimal.Decimal) decimal.Decimal {
	if side == sideSell {
		return qty.Neg()
	}
	return qty
}

// applied is what the journal recorded from one report, for the holder's trades (liveTrades).
type applied struct {
	// key is the order's journal key: the report's ClOrdID for a desk order, venueKey for the
	// venue's own; trade is the desk trade the order opens or closes ("" for the venue's own).
	key, trade string
	execID     int64 // the execution it recorded (0: none new)
	inserted   bool  // the order's row was written by the report (the venue's own order, or an identity a crash took)
	final      bool  // the order has a final state
	shares     []allocation
}

// allocation is one trade's share of an execution ("" the untagged remainder).
type allocation struct {
	trade string
	units decimal.Decimal
}

// apply records one report in a transaction of its own (applyTx).
func (j *journal) apply(ctx context.Context, r report) (applied, error) {
	tx, err := j.db.BeginTx(ctx, nil)
	if err != nil {
		return applied{}, fmt.Errorf("journal report %s: %w", r.ClOrdID, err)
	}
	defer func() { _ = tx.Rollback() }()
	a, err := applyTx(ctx, tx, r)
	if err != nil {
		return applied{}, err
	}
	if err := tx.Commit(); err != nil {
		return applied{}, fmt.Errorf("journal report %s: %w", r.ClOrdID, err)
	}
	return a, nil
}

// applyTx records one report in tx: the order's state, and the execution it carries beyond
// what the journal holds (a report's CumQty minus the units already recorded for its ClOrdID,
// so a trade report, a status report and a resend of either record one execution once, in one
// transaction or in several), allocated to the desk's trades.
func applyTx(ctx context.Context, tx *sql.Tx, r report) (applied, error) {
	if r.Refused {
		// A refusal ends an unfinished order of the journal's, nothing else (refusal.go).
		var status string
		err := tx.QueryRowContext(ctx, "SELECT `status` FROM `fx_fix_order` WHERE `clOrdId` = ? FOR UPDATE", r.ClOrdID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) || err == nil && status != stateSending && status != stateNew {
			return applied{}, nil
		}
		if err != nil {
			return applied{}, fmt.Errorf("journal refusal %s: %w", r.ClOrdID, err)
		}
	}
	a, held, err := whose(ctx, tx, r)
	if err != nil {
		return a, err
	}
	r.ClOrdID = a.key
	trade := a.trade
	next := stateNew
	switch r.OrdStatus {
	case ordFilled:
		next = stateFilled
	case ordRejected, ordCanceled, ordExpired, ordDoneForDay:
		next = stateRejected
		if r.CumQty.IsPositive() {
			next = stateFilled // what executed stands; the rest is gone
		}
	}
	a.final = next != stateNew
	var rej any
	if r.HasRejectReason {
		rej = r.RejectReason
	}
	// A reserved close's row holds the units open when it was reserved; its report says what was
	// sent (set before `status`, which MySQL assigns in order).
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_fix_order` SET `qty` = CASE WHEN `status` = ? AND ? > 0 THEN ? ELSE `qty` END, `status` = ?, `cumQty` = GREATEST(`cumQty`, ?), `avgPx` = ?, `venueOrderId` = ?, `rejectReason` = ?, `text` = ? WHERE `clOrdId` = ?",
		stateReserved, r.OrderQty, r.OrderQty, next, r.CumQty, r.AvgPx, r.OrderID, rej, truncate(r.Text, 255), r.ClOrdID); err != nil {
		return a, fmt.Errorf("journal report %s: %w", r.ClOrdID, err)
	}
	var recorded, notional decimal.Decimal
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(ABS(`units`)), 0), COALESCE(SUM(ABS(`units`) * `price`), 0) FROM `fx_fix_execution` WHERE `clOrdId` = ?", r.ClOrdID).
		Scan(&recorded, &notional); err != nil {
		return a, fmt.Errorf("journal report %s: %w", r.ClOrdID, err)
	}
	delta := r.CumQty.Sub(recorded)
	if !delta.IsPositive() {
		return a, nil
	}
	price := r.AvgPx
	switch {
	case recorded.IsPositive() && r.LastPx.IsPositive() && r.LastQty.Equal(delta):
		price = r.LastPx
	case recorded.IsPositive():
		price = r.CumQty.Mul(r.AvgPx).Sub(notional).Div(delta).Round(10)
	}
	execID := r.ExecID
	if r.ExecType != execTrade {
		// A status report's ExecID names the report, not the execution it shows.
		execID = fmt.Sprintf("%s#%s", r.ClOrdID, r.CumQty.String())
	}
	units := signed(r.Side, delta)
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO `fx_fix_execution` (`execId`, `clOrdId`, `venueOrderId`, `symbol`, `units`, `price`, `transactTime`) VALUES (?, ?, ?, ?, ?, ?, ?)",
		truncate(execID, 64), r.ClOrdID, r.OrderID, r.Symbol, units, price, at.UTC())
	if err != nil {
		return a, fmt.Errorf("journal execution %s: %w", execID, err)
	}
	if a.execID, err = res.LastInsertId(); err != nil {
		return a, err
	}
	if a.shares, err = allocate(ctx, tx, a.execID, r.ClOrdID, trade, held, r.Symbol, units); err != nil {
		return a, err
	}
	return a, nil
}

// whose finds the order r reports in the journal (FOR UPDATE): the desk's, or the venue's own,
// whose row it writes the first time. held is the signed units the desk order's trade holds
// before r's execution (allocate's bound for a close), read in the same statement so that a
// close's execution costs the journal no round trip of its own. The subquery locks the trade's
// allocations itself, as their own statement did: an outer FOR UPDATE does not reach the rows of
// a nested subquery on MySQL 8, and without the lock a second journal writer could allocate the
// same units between this read and the insert.
func whose(ctx context.Context, tx *sql.Tx, r report) (a applied, held decimal.Decimal, err error) {
	if r.ClOrdID != "" {
		var row order
		var vid sql.NullString
		err := tx.QueryRowContext(ctx, "SELECT o.`tradeId`, o.`symbol`, o.`side`, o.`venueOrderId`, "+
			"(SELECT COALESCE(SUM(x.`units`), 0) FROM `fx_fix_allocation` x WHERE x.`tradeId` = o.`tradeId` LIMIT 1 FOR UPDATE) "+
			"FROM `fx_fix_order` o WHERE o.`clOrdId` = ? FOR UPDATE", r.ClOrdID).
			Scan(&row.TradeID, &row.Symbol, &row.Side, &vid, &held)
		switch {
		case err == nil:
			row.VenueOrderID = vid.String
			if ours(row, r) {
				return applied{key: r.ClOrdID, trade: row.TradeID}, held, nil
			}
		case !errors.Is(err, sql.ErrNoRows):
			return applied{}, held, fmt.Errorf("journal report %s: %w", r.ClOrdID, err)
		}
	}
	// The venue's own order: it names no trade.
	a, held = applied{key: venueKey(r)}, decimal.Zero
	var one int
	err = tx.QueryRowContext(ctx, "SELECT 1 FROM `fx_fix_order` WHERE `clOrdId` = ? FOR UPDATE", a.key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err = tx.ExecContext(ctx, "INSERT INTO `fx_fix_order` (`clOrdId`, `tradeId`, `symbol`, `side`, `qty`, `status`, `text`) VALUES (?, '', ?, ?, ?, ?, ?)",
			a.key, r.Symbol, r.Side, r.OrderQty, stateSending, truncate("the venue's own order; its ClOrdID: "+r.ClOrdID, 255)); err != nil {
			return a, held, fmt.Errorf("journal report %s (the venue's order %s): %w", r.ClOrdID, r.OrderID, err)
		}
		a.inserted = true
		return a, held, nil
	}
	if err != nil {
		return a, held, fmt.Errorf("journal report %s (the venue's order %s): %w", r.ClOrdID, r.OrderID, err)
	}
	return a, held, nil
}

// allocate books an execution of order key to the desk's trades: an open's to itself, a close's
// to the trade it names as far as that trade holds units, the venue's own order's to the open
// trades it reduces in that symbol, oldest first (what no trade explains is allocated to "", the
// untagged remainder).
//
// A close never takes its trade past zero (held: what the trade holds before this execution;
// docs/fix.md, «A close that crosses the venue's own»):
// when the venue's own order reduced the trade between the desk's decision and the close's
// execution, what the close executed beyond the units left is a trade of its own, keyed by the
// close's ClOrdID — a tagged trade no desk position explains, which the reconciler closes as an
// orphan. Before, the trade went past zero: a trade on the other side that the next venue-side
// order was allocated against, and a desk position the reconciler could not square with it.
func allocate(ctx context.Context, tx *sql.Tx, execID int64, key, trade string, held decimal.Decimal, symbol string, units decimal.Decimal) ([]allocation, error) {
	shares := map[string]decimal.Decimal{}
	switch {
	case trade == key:
		shares[trade] = units
	case trade != "":
		take := reducing(held, units)
		if !take.IsZero() {
			shares[trade] = take
		}
		if past := units.Sub(take); !past.IsZero() {
			shares[key] = past
		}
	default:
		rows, err := tx.QueryContext(ctx, "SELECT a.`tradeId`, SUM(a.`units`), MIN(a.`executionId`) FROM `fx_fix_allocation` a JOIN `fx_fix_execution` e ON e.`id` = a.`executionId` "+
			"WHERE e.`symbol` = ? AND a.`tradeId` <> '' GROUP BY a.`tradeId` HAVING SUM(a.`units`) <> 0 ORDER BY MIN(a.`executionId`)", symbol)
		if err != nil {
			return nil, fmt.Errorf("journal allocate execution %d: %w", execID, err)
		}
		left := units
		for rows.Next() {
			var id string
			var open decimal.Decimal
			var first int64
			if err := rows.Scan(&id, &open, &first); err != nil {
				rows.Close()
				return nil, err
			}
			if share := reducing(open, left); !share.IsZero() {
				shares[id] = share
				left = left.Sub(share)
			}
		}
		rows.Close()
		if !left.IsZero() {
			shares[""] = left
		}
	}
	ids := make([]string, 0, len(shares))
	for id := range shares {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]allocation, 0, len(ids))
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_fix_allocation` (`executionId`, `tradeId`, `units`) VALUES (?, ?, ?)", execID, id, shares[id]); err != nil {
			return nil, fmt.Errorf("journal allocate execution %d: %w", execID, err)
		}
		out = append(out, allocation{trade: id, units: shares[id]})
	}
	return out, nil
}

// reducing is the part of units (signed) that reduces a trade holding open units towards zero:
// none when open is zero or on the same side.
func reducing(open, units decimal.Decimal) decimal.Decimal {
	if open.IsZero() || open.Sign() == units.Sign() {
		return decimal.Zero
	}
	return decimal.Min(open.Abs(), units.Abs()).Mul(decimal.NewFromInt(int64(units.Sign())))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// share is one allocation with its execution.
type share struct {
	ExecutionID int64
	TradeID     string // the trade's key: its opening ClOrdID
	// TradeExecID is the trade's first opening execution: its public id (0 for "").
	TradeExecID int64
	ClOrdID     string // the execution's order
	Symbol      string
	Units       decimal.Decimal // this trade's share, signed as the execution
	Price       decimal.Decimal
	Time        time.Time
}

// shares reads the allocations of the trades where picks them, oldest execution first.
func (j *journal) shares(ctx context.Context, where string, args ...any) ([]share, error) {
	rows, err := j.db.QueryContext(ctx, "SELECT a.`executionId`, a.`tradeId`, COALESCE((SELECT x.`executionId` FROM `fx_fix_allocation` x JOIN `fx_fix_execution` y ON y.`id` = x.`executionId` "+
		"WHERE x.`tradeId` = a.`tradeId` AND y.`clOrdId` = a.`tradeId` ORDER BY x.`executionId` LIMIT 1), 0), "+
		"e.`clOrdId`, e.`symbol`, a.`units`, e.`price`, e.`transactTime` "+
		"FROM `fx_fix_allocation` a JOIN `fx_fix_execution` e ON e.`id` = a.`executionId` WHERE "+where+" ORDER BY a.`executionId`, a.`tradeId`", args...)
	if err != nil {
		return nil, fmt.Errorf("journal read allocations: %w", err)
	}
	defer rows.Close()
	var out []share
	for rows.Next() {
		var s share
		if err := rows.Scan(&s.ExecutionID, &s.TradeID, &s.TradeExecID, &s.ClOrdID, &s.Symbol, &s.Units, &s.Price, &s.Time); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// tradeKey is the key (opening ClOrdID) of the trade whose public id is id: the first execution
// of its own order allocated to it — its first opening execution, or for what a close executed
// past its trade (allocate) the first execution that did. An execution of the venue's own order,
// and a close's that stayed within its trade, name no trade.
func (j *journal) tradeKey(ctx context.Context, id string) (string, bool, error) {
	var key string
	err := j.db.QueryRowContext(ctx, "SELECT a.`tradeId` FROM `fx_fix_allocation` a JOIN `fx_fix_execution` e ON e.`id` = a.`executionId` WHERE a.`executionId` = ? AND a.`tradeId` = e.`clOrdId`", id).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("journal trade %s: %w", id, err)
	}
	return key, key != "", nil
}

// closedPast is, by execution of the desk's own closes of trade key (the orders whose row names
// the trade), the units it executed past the trade — allocated to the close's own key (allocate)
// — as positive numbers; nil when none did. The desk booked those closes whole on the trade's
// position, so the reconciler counts them when it squares the position with the trade's fills
// (execution.Plan; docs/fix.md, «A close that crosses the venue's own»).
func (j *journal) closedPast(ctx context.Context, key string) (map[int64]decimal.Decimal, error) {
	rows, err := j.db.QueryContext(ctx, "SELECT a.`executionId`, a.`units` FROM `fx_fix_order` o "+
		"JOIN `fx_fix_execution` e ON e.`clOrdId` = o.`clOrdId` "+
		"JOIN `fx_fix_allocation` a ON a.`executionId` = e.`id` AND a.`tradeId` = e.`clOrdId` "+
		"WHERE o.`tradeId` = ? AND o.`clOrdId` <> o.`tradeId`", key)
	if err != nil {
		return nil, fmt.Errorf("journal closes past trade %s: %w", key, err)
	}
	defer rows.Close()
	var out map[int64]decimal.Decimal
	for rows.Next() {
		var id int64
		var units decimal.Decimal
		if err := rows.Scan(&id, &units); err != nil {
			return nil, fmt.Errorf("journal closes past trade %s: %w", key, err)
		}
		if out == nil {
			out = map[int64]decimal.Decimal{}
		}
		out[id] = out[id].Add(units.Abs())
	}
	return out, rows.Err()
}

// lastExecution is the newest execution's id (the venue state's "last transaction").
func (j *journal) lastExecution(ctx context.Context) (int64, error) {
	var id int64
	if err := j.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(`id`), 0) FROM `fx_fix_execution`").Scan(&id); err != nil {
		return 0, fmt.Errorf("journal last execution: %w", err)
	}
	return id, nil
}
