package ledger

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/store"
)

// Loaded is one deal of a history written whole from outside the desk (internal/yeargen): every
// field as the desk would have posted it, its id and time included, the balanceAfter already
// worked out along the account's chain. Money and prices are decimal text; nil leaves a column
// NULL.
type Loaded struct {
	ID, AccountID                  int64
	Type                           string
	Amount, BalanceAfter, Currency string
	OrderID, PositionID            *int64
	Symbol, Side                   *string
	Volume, Price, Markup          *string
	IdempotencyKey, Comment        string
	CreatedAt                      string // 2006-01-02 15:04:05.000, UTC
}

// loadCols is how many placeholders one Loaded takes.
const loadCols = 16

// MaxLoadRows is the most deals one Load statement carries: the server's limit of 65,535
// placeholders per prepared statement.
const MaxLoadRows = 65535 / loadCols

// Load writes deals — a history generated elsewhere, never a live posting — in one multi-row
// INSERT with their own ids. It is the ledger's door for the generator, kept here so that
// fx_deal keeps one writer: the caller owns the chain's consistency (Σ amounts = the balance it
// gives the account), which Post guarantees for live postings.
func Load(ctx context.Context, tx Execer, deals []Loaded) error {
	if len(deals) == 0 {
		return nil
	}
	if len(deals) > MaxLoadRows {
		return fmt.Errorf("ledger: load %d deals in one statement (at most %d)", len(deals), MaxLoadRows)
	}
	args := make([]any, 0, len(deals)*loadCols)
	for _, d := range deals {
		args = append(args, d.ID, d.AccountID, d.Type, d.Amount, d.BalanceAfter, d.Currency, d.OrderID, d.PositionID,
			d.Symbol, d.Side, d.Volume, d.Price, d.Markup, d.IdempotencyKey, d.Comment, d.CreatedAt)
	}
	if _, err := tx.ExecContext(ctx, loadInsert+store.ValuesRows(len(deals), loadCols), args...); err != nil {
		return fmt.Errorf("ledger: load %d deals (id %d first): %w", len(deals), deals[0].ID, err)
	}
	return nil
}

// LoadAll writes n deals, deal(i) giving the i-th, as Load does but in one statement for them all
// (store.LoadData): how a generated history's fx_deal is written whole into an empty table, so
// that MariaDB builds its indexes by sorting (docs/operations.md, «A year of data»). The server
// must take local files (store.LocalInfile).
func LoadAll(ctx context.Context, tx *sql.Tx, n int, deal func(i int) Loaded) error {
	err := store.LoadData(ctx, tx, loadDataSQL, n, func(i int, args []any) []any {
		d := deal(i)
		return append(args, d.ID, d.AccountID, d.Type, d.Amount, d.BalanceAfter, d.Currency, d.OrderID, d.PositionID,
			d.Symbol, d.Side, d.Volume, d.Price, d.Markup, d.IdempotencyKey, d.Comment, d.CreatedAt)
	})
	if err != nil {
		return fmt.Errorf("ledger: load %d deals: %w", n, err)
	}
	return nil
}

// loadDataSQL is LoadAll's statement, reading file, loadInsert's columns in loadInsert's order.
func loadDataSQL(file string) string {
	return "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE `fx_deal` " + store.LoadDataFormat +
		" (`id`, `accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, " +
		"`symbol`, `side`, `volume`, `price`, `markup`, `idempotencyKey`, `comment`, `createdAt`)"
}

const loadInsert = "INSERT INTO `fx_deal` (`id`, `accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, " +
	"`symbol`, `side`, `volume`, `price`, `markup`, `idempotencyKey`, `comment`, `createdAt`) VALUES "
