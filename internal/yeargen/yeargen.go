// Package yeargen fills a database with a broker's history at a chosen size — accounts, their
// deal chains, open and closed positions, resting and ended orders, events, audit rows and the
// end-of-day snapshots — consistent with the schema's meaning, so that reads, jobs and boots can
// be measured on a year of data (docs/operations.md, «A year of data»).
package yeargen

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"time"
)

// Size is how much history to write. Counts are totals over the whole range.
type Size struct {
	Accounts        int // trading accounts (one user each, a few users hold two)
	OpenPositions   int // positions open at the end
	ClosedPositions int // positions opened and closed within the range
	RestingOrders   int // PENDING LIMIT/STOP orders at the end
	Events          int // outbox rows (fx_event), all already relayed
	Audit           int // fx_audit rows
	Days            int // the range: Days trading days ending at Fill's end
	// The two named traders the benchmarks compare: one with BigClosed closed trades, one with
	// SmallClosed (both included in ClosedPositions).
	BigClosed, SmallClosed int
}

// Year is the mid-size broker of issue 42: 20,000 accounts, 50,000 open and 2,000,000 closed
// positions, about 5,000,000 deals, 5,000,000 events and 500,000 audit rows over 365 days.
func Year() Size {
	return Size{Accounts: 20000, OpenPositions: 50000, ClosedPositions: 2000000, RestingOrders: 10000,
		Events: 5000000, Audit: 500000, Days: 365, BigClosed: 10000, SmallClosed: 100}
}

// Month is a month of the same broker: what the soak starts from.
func Month() Size {
	return Size{Accounts: 2000, OpenPositions: 5000, ClosedPositions: 160000, RestingOrders: 1000,
		Events: 400000, Audit: 40000, Days: 30, BigClosed: 2000, SmallClosed: 100}
}

// Small is big enough for the optimiser to choose as it would on a year (the EXPLAIN test runs on
// it in make test) and quick to write.
func Small() Size {
	return Size{Accounts: 300, OpenPositions: 1000, ClosedPositions: 30000, RestingOrders: 300,
		Events: 60000, Audit: 5000, Days: 30, BigClosed: 3000, SmallClosed: 100}
}

// Result names what a benchmark needs to act as the generated users.
type Result struct {
	BigUser, SmallUser       int64  // userIds of the named traders
	BigAccount, SmallAccount int64  // their accounts
	BigToken, SmallToken     string // API tokens (role trader) for them
	DealerToken              string // an API token with the admin role
	Deals, Positions, Events int64  // rows written
	End                      time.Time
}

// ErrNotBuilt is returned until the generator is written.
var ErrNotBuilt = errors.New("yeargen: not built yet")

// Fill writes size's history ending at end into db (a migrated, empty database) from seed; the
// same seed and size write the same history. log reports progress.
func Fill(ctx context.Context, db *sql.DB, size Size, seed int64, end time.Time, log *slog.Logger) (Result, error) {
	return Result{}, ErrNotBuilt
}
