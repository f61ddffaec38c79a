package eod

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// A statement is read from the frozen days alone (docs/eod.md, «Statements»): its opening and
// closing balances are snapshots, and its deals are exactly the ledger rows between the two
// snapshots' last deals, so the same request gives the same statement however often it is
// asked and whatever the account did since.

// Statement bounds.
const (
	// MaxStatementDays is the longest range a statement covers, both ends included: a year,
	// leap day and all.
	MaxStatementDays = 366
	// MaxStatementDeals is the most deals one statement lists. A busier range is refused and
	// asked for in parts: the count stops at the cap on the (accountId, id) index, so a refusal
	// costs no more than reading the cap's index entries.
	MaxStatementDeals = 20000
)

// dateLayout is how a trading day is written: its rollover's New York date.
const dateLayout = "2006-01-02"

// StatementRange is a statement's trading days, From to To, both included (YYYY-MM-DD).
type StatementRange struct{ From, To string }

// ParseStatementRange reads a statement's range from the request's from and to. Its errors are
// EINVALID and name the parameter: a missing or malformed date, to before from, or a range of
// more than MaxStatementDays days.
func ParseStatementRange(from, to string) (StatementRange, error) {
	day := func(name, v string) (time.Time, error) {
		if v == "" {
			return time.Time{}, fx.Errorf(fx.EINVALID, "%s is required: a trading day such as 2026-01-02.", name)
		}
		t, err := time.Parse(dateLayout, v)
		if err != nil {
			return time.Time{}, fx.Errorf(fx.EINVALID, "%s must be a date such as 2026-01-02 (got %q).", name, v)
		}
		return t, nil
	}
	f, err := day("from", from)
	if err != nil {
		return StatementRange{}, err
	}
	t, err := day("to", to)
	if err != nil {
		return StatementRange{}, err
	}
	if t.Before(f) {
		return StatementRange{}, fx.Errorf(fx.EINVALID, "to (%s) is before from (%s).", to, from)
	}
	if days := int(t.Sub(f).Hours()/24) + 1; days > MaxStatementDays {
		return StatementRange{}, fx.Errorf(fx.EINVALID, "A statement covers at most %d days; from %s to %s is %d. Ask for a shorter range (from, to).",
			MaxStatementDays, from, to, days)
	}
	return StatementRange{From: from, To: to}, nil
}

// Snapshot is an account at the close of a frozen day, as fx_eod_account holds it. The opening
// of an account with no frozen day before the range is its start: no day, everything zero.
type Snapshot struct {
	TradingDay string    // "" at the account's start
	RolloverAt time.Time // the day's rollover; zero at the account's start
	Balance    decimal.Decimal
	// The marks, nil when a price was missing at the close.
	Equity, Margin, FreeMargin, FloatingPnL *decimal.Decimal
	OpenPositions, PendingOrders            int
	ThroughDealID                           int64 // the last deal Balance includes (0: none)
}

// StatementDeal is one deal of a statement with the balance the statement runs to after it.
type StatementDeal struct {
	book.Deal
	// Running is the opening balance plus this deal and every earlier one of the statement.
	Running decimal.Decimal
}

// Disagrees reports whether the deal's stored balanceAfter is not the running balance. It must
// never be so: the ledger writes balanceAfter from the locked balance.
func (d StatementDeal) Disagrees() bool { return !d.Running.Equal(d.BalanceAfter) }

// ClosedPosition is a position with closes among the statement's deals: what those closes took
// off it and made, and what it was charged through the closing snapshot.
type ClosedPosition struct {
	PositionID int64
	Symbol     string
	Side       fx.Side
	Volume     decimal.Decimal // lots closed within the statement
	OpenPrice  decimal.Decimal
	// ClosePrice is the statement's closes' price, weighted by volume when there are several.
	ClosePrice decimal.Decimal
	OpenedAt   time.Time
	ClosedAt   time.Time       // the statement's last close of it
	Profit     decimal.Decimal // Σ the statement's PROFIT deals of it
	// Swap and Commission are the position's SWAP and COMMISSION deals through the closing
	// snapshot, whenever they were charged: its commission is charged when it opens, which may
	// be before the statement.
	Swap, Commission decimal.Decimal
	closes           int
	lastDeal         int64
	volumePrice      decimal.Decimal
}

// OpenPosition is a position open at the closing rollover, at its volume then.
type OpenPosition struct {
	PositionID int64
	Symbol     string
	Side       fx.Side
	Volume     decimal.Decimal
	OpenPrice  decimal.Decimal
	OpenedAt   time.Time
}

// Totals are the statement's deals summed by type, as the ledger signs them (a withdrawal and
// a commission are negative); Net is all of them, the closing balance less the opening one.
type Totals struct {
	Deposits, Withdrawals, Profit, Swaps, Commissions, Adjustments, Net decimal.Decimal
}

// DayFigure is one frozen day of the equity curve; Equity is nil when it was not priced.
type DayFigure struct {
	TradingDay string
	Balance    decimal.Decimal
	Equity     *decimal.Decimal
}

// Statement is an account over a range of frozen trading days.
type Statement struct {
	AccountID int64
	Currency  string
	Range     StatementRange
	// Opening is the account's snapshot on the last frozen day before the range; Closing its
	// snapshot on the last frozen day of it, whose day is how far the statement is frozen.
	Opening, Closing Snapshot
	Deals            []StatementDeal
	Closed           []ClosedPosition // by their last close in the statement
	Open             []OpenPosition   // by id
	Totals           Totals
	Days             []DayFigure // every frozen day of the range the account had
}

// FrozenThrough is the closing snapshot's day: the range's days after it are not frozen yet.
func (s *Statement) FrozenThrough() string { return s.Closing.TradingDay }

// Reconciled reports whether the opening balance and the statement's deals make the closing
// balance, as they must (Reconcile checks every frozen day the same way).
func (s *Statement) Reconciled() bool {
	return s.Opening.Balance.Add(s.Totals.Net).Equal(s.Closing.Balance)
}

// Disagreements are the ids of the deals whose stored balanceAfter is not the running balance.
func (s *Statement) Disagreements() []int64 {
	out := []int64{}
	for _, d := range s.Deals {
		if d.Disagrees() {
			out = append(out, d.ID)
		}
	}
	return out
}

// ReadStatement reads account's statement over r from the frozen days. It returns ECONFLICT
// when no day of r is frozen for the account (none is yet, or the account was opened after the
// last that is), and EINVALID when the range holds more than MaxStatementDeals deals. The reads
// are one consistent view.
func ReadStatement(ctx context.Context, db *sql.DB, account book.Account, r StatementRange) (*Statement, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("statement of account %d: begin: %w", account.ID, err)
	}
	defer tx.Rollback()
	s := &Statement{AccountID: account.ID, Currency: account.Currency, Range: r}
	what := fmt.Sprintf("statement of account %d", account.ID)

	// The range's snapshots are its equity curve, and the last of them is the closing.
	days, err := snapshots(ctx, tx, account.ID, "s.`tradingDay` >= ? AND s.`tradingDay` <= ? ORDER BY s.`tradingDay`", r.From, r.To)
	if err != nil {
		return nil, fmt.Errorf("%s: closing: %w", what, err)
	}
	if len(days) == 0 {
		return nil, rangeNotFrozen(ctx, tx, account.ID, r)
	}
	closing := days[len(days)-1]
	before, err := snapshots(ctx, tx, account.ID, "s.`tradingDay` < ? ORDER BY s.`tradingDay` DESC LIMIT 1", r.From)
	if err != nil {
		return nil, fmt.Errorf("%s: opening: %w", what, err)
	}
	var opening Snapshot
	if len(before) == 1 {
		opening = before[0]
	} else {
		// The account's start: nothing held, so every mark is zero rather than unknown.
		zero := decimal.Zero
		opening.Equity, opening.Margin, opening.FreeMargin, opening.FloatingPnL = &zero, &zero, &zero, &zero
	}
	s.Opening, s.Closing = opening, closing
	s.Days = make([]DayFigure, len(days))
	for i, d := range days {
		s.Days[i] = DayFigure{TradingDay: d.TradingDay, Balance: d.Balance, Equity: d.Equity}
	}

	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM `fx_deal` WHERE `accountId` = ? AND `id` > ? AND `id` <= ? LIMIT ?) c",
		account.ID, opening.ThroughDealID, closing.ThroughDealID, MaxStatementDeals+1).Scan(&n); err != nil {
		return nil, fmt.Errorf("%s: count deals: %w", what, err)
	}
	if n > MaxStatementDeals {
		return nil, fx.Errorf(fx.EINVALID, "Account %d has more than %d deals from %s to %s, more than one statement lists: ask for a shorter range (from, to).",
			account.ID, MaxStatementDeals, r.From, r.To)
	}
	deals, err := store.QueryAll(ctx, tx, what+": deals", book.ScanDeal,
		"SELECT "+book.DealCols+" FROM `fx_deal` d WHERE d.`accountId` = ? AND d.`id` > ? AND d.`id` <= ? ORDER BY d.`id`",
		account.ID, opening.ThroughDealID, closing.ThroughDealID)
	if err != nil {
		return nil, err
	}
	running := opening.Balance
	s.Deals = make([]StatementDeal, len(deals))
	for i, d := range deals {
		running = running.Add(d.Amount)
		s.Deals[i] = StatementDeal{Deal: d, Running: running}
		s.Totals.add(d)
	}
	if s.Closed, err = closedPositions(ctx, tx, account.ID, opening.ThroughDealID, s.Deals); err != nil {
		return nil, fmt.Errorf("%s: closed positions: %w", what, err)
	}
	if s.Open, err = openPositions(ctx, tx, account.ID, closing); err != nil {
		return nil, fmt.Errorf("%s: open positions: %w", what, err)
	}
	return s, nil
}

func (t *Totals) add(d book.Deal) {
	switch d.Type {
	case fx.DealDeposit:
		t.Deposits = t.Deposits.Add(d.Amount)
	case fx.DealWithdrawal:
		t.Withdrawals = t.Withdrawals.Add(d.Amount)
	case fx.DealProfit:
		t.Profit = t.Profit.Add(d.Amount)
	case fx.DealSwap:
		t.Swaps = t.Swaps.Add(d.Amount)
	case fx.DealCommission:
		t.Commissions = t.Commissions.Add(d.Amount)
	case fx.DealAdjustment:
		t.Adjustments = t.Adjustments.Add(d.Amount)
	}
	t.Net = t.Net.Add(d.Amount)
}

// snapshots reads the account's rows on the frozen days that tail (a condition over
// s.`tradingDay`, its order and limit) admits. A row of a day whose fx_eod_day is missing is a
// freeze still under way: not a day.
func snapshots(ctx context.Context, tx *sql.Tx, account int64, tail string, args ...any) ([]Snapshot, error) {
	return store.QueryAll(ctx, tx, "snapshots", func(sc store.Scanner) (Snapshot, error) {
		var s Snapshot
		var equity, margin, free, floating decimal.NullDecimal
		err := sc.Scan(&s.TradingDay, &s.RolloverAt, &s.Balance, &equity, &margin, &free, &floating, &s.OpenPositions, &s.PendingOrders, &s.ThroughDealID)
		s.Equity, s.Margin, s.FreeMargin, s.FloatingPnL = ptr(equity), ptr(margin), ptr(free), ptr(floating)
		return s, err
	}, "SELECT DATE_FORMAT(s.`tradingDay`, '%Y-%m-%d'), d.`rolloverAt`, s.`balance`, s.`equity`, s.`margin`, s.`freeMargin`, s.`floatingPnl`, "+
		"s.`openPositions`, s.`pendingOrders`, s.`throughDealId` FROM `fx_eod_account` s JOIN `fx_eod_day` d ON d.`tradingDay` = s.`tradingDay` "+
		"WHERE s.`accountId` = ? AND "+tail, append([]any{account}, args...)...)
}

func ptr(d decimal.NullDecimal) *decimal.Decimal {
	if !d.Valid {
		return nil
	}
	return &d.Decimal
}

// rangeNotFrozen is the refusal of a range without a frozen day of the account, saying which of the
// two it is and how far the end of day has got.
func rangeNotFrozen(ctx context.Context, tx *sql.Tx, account int64, r StatementRange) error {
	var last sql.NullString
	var inRange int
	if err := tx.QueryRowContext(ctx, "SELECT DATE_FORMAT(MAX(`tradingDay`), '%Y-%m-%d'), COALESCE(SUM(`tradingDay` >= ? AND `tradingDay` <= ?), 0) FROM `fx_eod_day`",
		r.From, r.To).Scan(&last, &inRange); err != nil {
		return fmt.Errorf("statement of account %d: frozen days: %w", account, err)
	}
	through := "no day is frozen yet"
	if last.Valid {
		through = "the end of day has frozen through " + last.String
	}
	if inRange > 0 {
		return fx.Errorf(fx.ECONFLICT, "Account %d has no frozen day from %s to %s: it was opened after the last of them (%s). A statement covers frozen days only.",
			account, r.From, r.To, through)
	}
	return fx.Errorf(fx.ECONFLICT, "No trading day from %s to %s is frozen (%s): a statement covers frozen days only; a day is frozen after its 17:00 New York rollover.",
		r.From, r.To, through)
}

// closedPositions gathers the statement's PROFIT deals by position, with each position's row
// and its swaps and commissions through the closing snapshot's last deal: those after opening
// (the opening snapshot's last deal) are among the statement's deals already, so only the
// earlier ones are read.
func closedPositions(ctx context.Context, tx *sql.Tx, account, opening int64, deals []StatementDeal) ([]ClosedPosition, error) {
	byID := map[int64]*ClosedPosition{}
	var ids []int64
	for _, d := range deals {
		if d.Type != fx.DealProfit || d.PositionID == nil {
			continue
		}
		c := byID[*d.PositionID]
		if c == nil {
			c = &ClosedPosition{PositionID: *d.PositionID}
			byID[c.PositionID] = c
			ids = append(ids, c.PositionID)
		}
		var vol, price decimal.Decimal
		if d.Volume != nil {
			vol = *d.Volume
		}
		if d.Price != nil {
			price = *d.Price
		}
		c.Volume = c.Volume.Add(vol)
		c.volumePrice = c.volumePrice.Add(vol.Mul(price))
		c.Profit = c.Profit.Add(d.Amount)
		c.ClosePrice = price
		c.ClosedAt = d.CreatedAt
		c.closes++
		c.lastDeal = d.ID
	}
	charge := func(position int64, typ fx.DealType, amount decimal.Decimal) {
		c := byID[position]
		if c == nil {
			return
		}
		switch typ {
		case fx.DealSwap:
			c.Swap = c.Swap.Add(amount)
		case fx.DealCommission:
			c.Commission = c.Commission.Add(amount)
		}
	}
	for _, d := range deals {
		if d.PositionID != nil {
			charge(*d.PositionID, d.Type, d.Amount)
		}
	}
	// Read in parts: a statement may close thousands of positions, and one IN list of them all
	// would be a statement the server has to parse whole.
	const part = 1000
	for start := 0; start < len(ids); start += part {
		chunk := store.Int64Args(ids[start:min(start+part, len(ids))])
		in := store.Placeholders(len(chunk))
		rows, err := tx.QueryContext(ctx, "SELECT `id`, `symbol`, `side`, `openPrice`, `openedAt` FROM `fx_position` WHERE `accountId` = ? AND `id` IN ("+in+")",
			append([]any{account}, chunk...)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var p ClosedPosition
			if err := rows.Scan(&id, &p.Symbol, &p.Side, &p.OpenPrice, &p.OpenedAt); err != nil {
				rows.Close()
				return nil, err
			}
			c := byID[id]
			c.Symbol, c.Side, c.OpenPrice, c.OpenedAt = p.Symbol, p.Side, p.OpenPrice, p.OpenedAt
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if opening == 0 {
			continue
		}
		// The positions' own deals before the statement, on the (positionId, …) index, whose
		// entries carry the id: the statement's own deals are passed over in the index.
		rows, err = tx.QueryContext(ctx, "SELECT `positionId`, `type`, `amount` FROM `fx_deal` WHERE `positionId` IN ("+in+") AND `accountId` = ? "+
			"AND `id` <= ? AND `type` IN ('SWAP', 'COMMISSION')", append(chunk, account, opening)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var typ fx.DealType
			var amount decimal.Decimal
			if err := rows.Scan(&id, &typ, &amount); err != nil {
				rows.Close()
				return nil, err
			}
			charge(id, typ, amount)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	out := make([]ClosedPosition, 0, len(ids))
	for _, id := range ids {
		c := byID[id]
		if c.closes > 1 && c.Volume.IsPositive() {
			// The price column's 10 places: a weighted price of quotes with at most that many.
			c.ClosePrice = c.volumePrice.DivRound(c.Volume, 10)
		}
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ClosedPosition) int { return cmp.Compare(a.lastDeal, b.lastDeal) })
	return out, nil
}

// openPositions reads the positions open at the closing rollover, at their volume then, as a
// day rebuilt from the ledger reads them: whether the day was frozen at its rollover or later,
// the list is the ledger's view at that instant.
func openPositions(ctx context.Context, tx *sql.Tx, account int64, closing Snapshot) ([]OpenPosition, error) {
	c := cut{day: fx.Rollover{Date: closing.TradingDay, At: closing.RolloverAt}}
	from, args := c.positions("?")
	var q strings.Builder
	q.WriteString("SELECT p.`id`, p.`symbol`, p.`side`, p.`v`, p.`openPrice`, p.`openedAt` FROM ")
	q.WriteString(from)
	q.WriteString(" WHERE p.`v` > 0 ORDER BY p.`id`")
	return store.QueryAll(ctx, tx, "open positions", func(sc store.Scanner) (OpenPosition, error) {
		var p OpenPosition
		err := sc.Scan(&p.PositionID, &p.Symbol, &p.Side, &p.Volume, &p.OpenPrice, &p.OpenedAt)
		return p, err
	}, q.String(), append(args, account)...)
}
