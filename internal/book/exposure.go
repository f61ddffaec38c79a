package book

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/store"
)

// ExposedSymbols lists the symbols the desk is exposed to: open positions and resting orders.
// The quote mirror keeps them first when it has to truncate its snapshot.
func ExposedSymbols(ctx context.Context, db *sql.DB) ([]string, error) {
	return store.QueryAll(ctx, db, "exposed symbols", func(sc store.Scanner) (string, error) {
		var s string
		err := sc.Scan(&s)
		return s, err
	},
		"SELECT `symbol` FROM `fx_position` WHERE `status` = 'OPEN' "+
			"UNION SELECT `symbol` FROM `fx_order` WHERE `status` = 'PENDING'")
}

// HasExposure reports whether the desk has any open position or resting order; the quote mirror
// raises its unavailable alert only then, because on an idle desk the claim would be untrue.
func HasExposure(ctx context.Context, db *sql.DB) (bool, error) {
	var any bool
	err := db.QueryRowContext(ctx,
		"SELECT EXISTS (SELECT 1 FROM `fx_position` WHERE `status` = 'OPEN') "+
			"OR EXISTS (SELECT 1 FROM `fx_order` WHERE `status` = 'PENDING')").Scan(&any)
	if err != nil {
		return false, fmt.Errorf("desk exposure: %w", err)
	}
	return any, nil
}
