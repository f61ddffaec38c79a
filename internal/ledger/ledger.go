package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Deal is one row of fx_deal: one balance change.
type Deal struct {
	ID           int64
	AccountID    int64
	Type         fx.DealType
	Amount       decimal.Decimal
	BalanceAfter decimal.Decimal
	Currency     string
	OrderID      *int64
	PositionID   *int64
	Symbol       *string
	Side         *fx.Side
	Volume       *decimal.Decimal
	Price        *decimal.Decimal
	// Markup is the spread markup the desk earned on the fill this deal books (a close's PROFIT
	// deal), in the account's currency; nil on other deals (docs/pnl.md).
	Markup         *decimal.Decimal
	IdempotencyKey string
	Comment        string
	CreatedAt      time.Time
	// VenueTransactionID is the venue fill an EXTERNAL close books (unique per position), so
	// the reconciler books a fill nobody booked at its own price, and never one twice.
	VenueTransactionID *int64

	// IDsFrom is not a column. When set, the deal's order and position ids are the values of
	// these session variables, which statements earlier in the caller's round trip set (a fill
	// inserts its order, its position and their commission deal in one batch, before it knows
	// their ids); OrderID and PositionID are then ignored, and the idempotency key written is
	// IdempotencyKey followed by the order id.
	IDsFrom *SessionIDs
}

// SessionIDs names the session variables (such as "@fx_order_id") holding a deal's order and
// position ids.
type SessionIDs struct{ Order, Position string }

// Account is an account row the caller has locked FOR UPDATE in the transaction the posting
// is sent in, with what the ledger needs of it.
type Account struct {
	ID       int64
	Currency string
	// Balance is the balance as locked; Post moves it to the account's last deal's balanceAfter.
	Balance decimal.Decimal

	// What happens to the account's stored marks (equity, used margin) with the balance. At
	// most one may be set; with neither they are left to the next mark (a close, a deposit).
	//
	// Marks are new marks the caller computed at its prices with these deals included (a fill's
	// commission, a withdrawal with open positions): written with the balance, markedAt = now.
	Marks *Marks
	// EquityMoves moves stored equity by the amount posted, used margin unchanged: the change
	// is realised and priced no differently from the last mark (a rollover charge).
	EquityMoves bool
}

// Marks are an account's stored equity and used margin.
type Marks struct{ Equity, UsedMargin decimal.Decimal }

// Stmt is one statement of a posting, for the caller to send in its transaction.
type Stmt struct {
	SQL  string
	Args []any
}

// Posting is a set of deals ready to write: the deals as they will be written (without their
// ids, which the database assigns) and the statements that write them.
type Posting struct {
	Deals []Deal
	// Stmts are the UPDATE of the accounts' balances (one per maxCase accounts: two statements
	// in all for up to 50 accounts), then one multi-row INSERT of the deals. The INSERT is last, so LAST_INSERT_ID() right after the posting is the id of
	// its first deal; the others follow @@auto_increment_increment apart (1 on one server, the
	// cluster's size on a Galera node).
	Stmts []Stmt
}

// Execer is the caller's transaction when it is a database/sql one (*sql.Tx, *sql.Conn).
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Exec sends the posting's statements in tx.
func (p Posting) Exec(ctx context.Context, tx Execer) error {
	for _, s := range p.Stmts {
		if _, err := tx.ExecContext(ctx, s.SQL, s.Args...); err != nil {
			return fmt.Errorf("post %d deals: %w", len(p.Deals), err)
		}
	}
	return nil
}

// Post prepares deals on the locked accounts. Each deal names its account by AccountID, which
// must be one of accounts; its Currency is the account's, its Amount is rounded with Money and
// its BalanceAfter is the account's balance after it, taking deals in slice order within each
// account. Each account's Balance moves to its last deal's balanceAfter. Accounts without a deal
// are not written. Post writes nothing itself: the caller sends Posting.Stmts in the
// transaction that holds the locks (see the package comment), and rolls back if any fails.
//
// It returns an error, and moves no balance, when a deal has no type or idempotency key, names
// an account not in accounts, or an account is listed twice or sets both Marks and EquityMoves.
func Post(accounts []*Account, deals []Deal) (Posting, error) {
	byID := make(map[int64]*Account, len(accounts))
	for _, a := range accounts {
		if _, dup := byID[a.ID]; dup {
			return Posting{}, fmt.Errorf("ledger: account %d listed twice", a.ID)
		}
		if a.Marks != nil && a.EquityMoves {
			return Posting{}, fmt.Errorf("ledger: account %d: both new marks and moving equity", a.ID)
		}
		byID[a.ID] = a
	}
	for i, d := range deals {
		switch {
		case d.Type == "":
			return Posting{}, fmt.Errorf("ledger: deal %d has no type", i)
		case d.IdempotencyKey == "":
			return Posting{}, fmt.Errorf("ledger: %s deal %d has no idempotency key", d.Type, i)
		case byID[d.AccountID] == nil:
			return Posting{}, fmt.Errorf("ledger: %s deal %q: account %d is not among the locked accounts", d.Type, d.IdempotencyKey, d.AccountID)
		case d.IDsFrom != nil && !(sessionVar.MatchString(d.IDsFrom.Order) && sessionVar.MatchString(d.IDsFrom.Position)):
			return Posting{}, fmt.Errorf("ledger: deal %q: %q and %q are not session variables", d.IdempotencyKey, d.IDsFrom.Order, d.IDsFrom.Position)
		}
	}
	if len(deals) == 0 {
		return Posting{}, nil
	}

	out := Posting{Deals: make([]Deal, len(deals))}
	delta := map[int64]decimal.Decimal{}
	var ins strings.Builder
	ins.WriteString(dealInsert)
	args := make([]any, 0, 15*len(deals))
	for i, d := range deals {
		a := byID[d.AccountID]
		d.Currency = a.Currency
		d.Amount = fx.RoundMoney(a.Currency, d.Amount)
		d.BalanceAfter = a.Balance.Add(d.Amount)
		a.Balance = d.BalanceAfter
		delta[a.ID] = delta[a.ID].Add(d.Amount)
		if i > 0 {
			ins.WriteString(", ")
		}
		if d.IDsFrom != nil {
			fmt.Fprintf(&ins, "(?, ?, ?, ?, ?, %s, %s, ?, ?, ?, ?, ?, CONCAT(?, %s), ?, ?)", d.IDsFrom.Order, d.IDsFrom.Position, d.IDsFrom.Order)
			args = append(args, d.AccountID, d.Type, d.Amount, d.BalanceAfter, d.Currency, d.Symbol, d.Side, d.Volume, d.Price, d.Markup,
				d.IdempotencyKey, d.Comment, d.VenueTransactionID)
		} else {
			ins.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			args = append(args, d.AccountID, d.Type, d.Amount, d.BalanceAfter, d.Currency, d.OrderID, d.PositionID, d.Symbol, d.Side,
				d.Volume, d.Price, d.Markup, d.IdempotencyKey, d.Comment, d.VenueTransactionID)
		}
		out.Deals[i] = d
	}

	moved := make([]*Account, 0, len(delta))
	for id := range delta {
		moved = append(moved, byID[id])
	}
	slices.SortFunc(moved, func(x, y *Account) int { return cmp.Compare(x.ID, y.ID) })
	for len(moved) > 0 {
		n := min(len(moved), maxCase)
		out.Stmts = append(out.Stmts, balanceUpdate(moved[:n], delta))
		moved = moved[n:]
	}
	out.Stmts = append(out.Stmts, Stmt{SQL: ins.String(), Args: args})
	return out, nil
}

// maxCase is how many accounts one balance UPDATE moves. The server evaluates a CASE by trying
// its WHENs in turn for every row it updates, so one UPDATE of n accounts costs n² comparisons:
// 500 accounts (a rollover batch) took 30–80 ms of server time as one statement and 8 ms as ten.
// Postings over more accounts send one UPDATE per maxCase of them, in id order, in the same
// round trip.
const maxCase = 50

// dealInsert is the head of the one statement that writes deals.
const dealInsert = "INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, " +
	"`symbol`, `side`, `volume`, `price`, `markup`, `idempotencyKey`, `comment`, `venueTransactionId`) VALUES "

var sessionVar = regexp.MustCompile(`^@[A-Za-z_][A-Za-z0-9_]*$`)

// balanceUpdate is the one statement that moves balances: every moved account (in id order, as
// they were locked) to its new balance and its next balanceVersion, with its marks as Account
// says. The balance is written,
// not added to: the caller holds the row lock, so the figure is the one every balanceAfter was
// computed from.
func balanceUpdate(moved []*Account, delta map[int64]decimal.Decimal) Stmt {
	type value struct {
		expr string
		arg  any // nil: expr takes no argument
	}
	columns := []struct {
		name string
		of   func(*Account) (value, bool)
	}{
		{"balance", func(a *Account) (value, bool) { return value{"?", a.Balance}, true }},
		{"equity", func(a *Account) (value, bool) {
			switch {
			case a.Marks != nil:
				return value{"?", a.Marks.Equity}, true
			case a.EquityMoves:
				return value{"`equity` + ?", delta[a.ID]}, true
			}
			return value{}, false
		}},
		{"usedMargin", func(a *Account) (value, bool) {
			if a.Marks != nil {
				return value{"?", a.Marks.UsedMargin}, true
			}
			return value{}, false
		}},
		{"markedAt", func(a *Account) (value, bool) { return value{"NOW(3)", nil}, a.Marks != nil }},
	}
	var sb strings.Builder
	var args []any
	// Over many accounts of a small table the optimizer would rather scan every row, and an
	// UPDATE locks each row it scans: the index makes it lock the accounts it moves and no other.
	if len(moved) > 1 {
		sb.WriteString("UPDATE `fx_account` FORCE INDEX (PRIMARY) SET ")
	} else {
		sb.WriteString("UPDATE `fx_account` SET ")
	}
	first := true
	for _, c := range columns {
		var set []*Account
		var vals []value
		for _, a := range moved {
			if v, ok := c.of(a); ok {
				set, vals = append(set, a), append(vals, v)
			}
		}
		if len(set) == 0 {
			continue
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&sb, "`%s` = ", c.name)
		if len(moved) == 1 {
			sb.WriteString(vals[0].expr)
			if vals[0].arg != nil {
				args = append(args, vals[0].arg)
			}
			continue
		}
		sb.WriteString("CASE `id`")
		for i, a := range set {
			sb.WriteString(" WHEN ? THEN " + vals[i].expr)
			args = append(args, a.ID)
			if vals[i].arg != nil {
				args = append(args, vals[i].arg)
			}
		}
		fmt.Fprintf(&sb, " ELSE `%s` END", c.name)
	}
	// Every committed balance gets its own version, which the risk engine follows by commit
	// (trading.RiskDesk.FollowBalances); the row lock makes + 1 race-free.
	sb.WriteString(", `balanceVersion` = `balanceVersion` + 1")
	if len(moved) == 1 {
		sb.WriteString(" WHERE `id` = ?")
		args = append(args, moved[0].ID)
	} else {
		sb.WriteString(" WHERE `id` IN (" + store.Placeholders(len(moved)) + ")")
		for _, a := range moved {
			args = append(args, a.ID)
		}
	}
	return Stmt{SQL: sb.String(), Args: args}
}
