// Package yeargen fills a database with a broker's history at a chosen size — accounts, their
// deal chains, open and closed positions, resting and ended orders, events, audit rows and the
// end-of-day snapshots — consistent with the schema's meaning, so that reads, jobs and boots can
// be measured on a year of data (docs/operations.md, «A year of data»).
package yeargen

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/store"
)

// Size is how much history to write. Counts are totals over the whole range.
type Size struct {
	Accounts        int // trading accounts (one user each, a few users hold two)
	OpenPositions   int // positions open at the end
	ClosedPositions int // positions opened and closed within the range
	RestingOrders   int // PENDING LIMIT/STOP orders at the end
	Events          int // outbox rows (fx_event), all already relayed
	Audit           int // fx_audit rows
	Days            int // the range: the Days calendar days before Fill's end (weekends quiet)
	// The two named traders the benchmarks compare: one with BigClosed closed trades, one with
	// SmallClosed (both included in ClosedPositions).
	BigClosed, SmallClosed int
	// AccountDays is how many frozen days, counting back from the last, get a snapshot row per
	// account in fx_eod_account (0: every day). Every frozen day gets its fx_eod_day, prices and
	// desk rows whatever it is; a day without account rows reconciles from the ledger's start.
	AccountDays int
}

// Year is a mid-size broker (docs/operations.md, «A year of data»): 20,000 accounts, 50,000 open and 2,000,000 closed
// positions, about 5,000,000 deals, 5,000,000 events and 500,000 audit rows over 365 days. Its
// accounts' end-of-day rows cover the last 20 frozen days (a month of trading days): every day's
// would be 5 million rows more, a fifth of the fill.
func Year() Size {
	return Size{Accounts: 20000, OpenPositions: 50000, ClosedPositions: 2000000, RestingOrders: 10000,
		Events: 5000000, Audit: 500000, Days: 365, BigClosed: 10000, SmallClosed: 100, AccountDays: 20}
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
	// What else was written, for the report.
	Accounts, Orders, SwapCharges, Audit, EODAccounts, EODDays int64
	Took                                                       time.Duration
}

// SizeNamed is the size a command line names: year, month or small.
func SizeNamed(name string) (Size, error) {
	switch name {
	case "year":
		return Year(), nil
	case "month":
		return Month(), nil
	case "small":
		return Small(), nil
	}
	return Size{}, fmt.Errorf("yeargen: size must be year, month or small (got %q)", name)
}

// OpenLoader is a pool for Fill on the database dsn names (migrated already), its sessions
// skipping the unique and foreign key checks: every key Fill writes is unique by construction
// and every reference points at a row it writes. On such a pool Fill writes each table in one
// LOAD DATA statement when the server takes local files, which MariaDB bulk-loads into the empty
// table, building each index by sorting, once (docs/operations.md, «A year of data»). Only the
// generator opens one.
func OpenLoader(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("yeargen: %w", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["unique_checks"] = "0"
	cfg.Params["foreign_key_checks"] = "0"
	return store.ConnectPool(cfg.FormatDSN(), writers+1)
}
