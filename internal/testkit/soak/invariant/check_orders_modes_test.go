package invariant

import (
	"database/sql"
	"testing"
	"time"
)

// The position modes' judges, each over a clean history and a planted violation.
func TestPositionModeJudges(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	closed := func(s int, reason string) (sql.NullTime, sql.NullString) {
		return sql.NullTime{Time: at(s), Valid: true}, sql.NullString{String: reason, Valid: true}
	}
	pos := func(id, account int64, side string, opened int, status string, closedAt int, reason string) dbPosition {
		p := dbPosition{ID: id, Account: account, Symbol: "EURUSD", Side: side, Status: status, OpenedAt: at(opened)}
		if status == "CLOSED" {
			p.ClosedAt, p.CloseReason = closed(closedAt, reason)
		}
		return p
	}
	snapshot := func(ps ...dbPosition) *Snapshot {
		return &Snapshot{Accounts: []dbAccount{{ID: 1, Group: "n"}, {ID: 2, Group: "f"}, {ID: 3, Group: "h"}},
			PositionModes: map[string]string{"n": "NETTING", "f": "FIFO", "h": "HEDGING"}, Positions: ps}
	}
	for _, tc := range []struct {
		name  string
		check func(*Snapshot, *Evidence) Result
		s     *Snapshot
		bad   bool
	}{
		{"netting: one open, one closed", checkNettingOnePosition, snapshot(pos(1, 1, "BUY", 0, "CLOSED", 5, "NETTED"), pos(2, 1, "SELL", 5, "OPEN", 0, "")), false},
		{"netting: two open on one symbol", checkNettingOnePosition, snapshot(pos(1, 1, "BUY", 0, "OPEN", 0, ""), pos(2, 1, "BUY", 5, "OPEN", 0, "")), true},
		{"hedging may hold two", checkNettingOnePosition, snapshot(pos(1, 3, "BUY", 0, "OPEN", 0, ""), pos(2, 3, "SELL", 5, "OPEN", 0, "")), false},
		{"fifo: two on one side", checkFIFOOneSide, snapshot(pos(1, 2, "BUY", 0, "OPEN", 0, ""), pos(2, 2, "BUY", 5, "OPEN", 0, "")), false},
		{"fifo: both sides", checkFIFOOneSide, snapshot(pos(1, 2, "BUY", 0, "OPEN", 0, ""), pos(2, 2, "SELL", 5, "OPEN", 0, "")), true},
		{"fifo: oldest closed first", checkFIFOOldestFirst, snapshot(pos(1, 2, "BUY", 0, "CLOSED", 10, "NETTED"), pos(2, 2, "BUY", 5, "CLOSED", 20, "CLIENT")), false},
		{"fifo: closes of one transaction", checkFIFOOldestFirst, snapshot(pos(1, 2, "BUY", 0, "CLOSED", 10, "NETTED"), pos(2, 2, "BUY", 5, "CLOSED", 10, "NETTED")), false},
		{"fifo: a dealer's close is not judged", checkFIFOOldestFirst, snapshot(pos(1, 2, "BUY", 0, "OPEN", 0, ""), pos(2, 2, "BUY", 5, "CLOSED", 10, "DEALER")), false},
		{"fifo: newer closed by the trader, older still open", checkFIFOOldestFirst, snapshot(pos(1, 2, "BUY", 0, "OPEN", 0, ""), pos(2, 2, "BUY", 5, "CLOSED", 10, "CLIENT")), true},
		{"fifo: newer stopped, older closed later", checkFIFOOldestFirst, snapshot(pos(1, 2, "BUY", 0, "CLOSED", 30, "CLIENT"), pos(2, 2, "BUY", 5, "CLOSED", 10, "SL")), true},
	} {
		r := tc.check(tc.s, &Evidence{})
		if got := len(r.Violations) > 0; got != tc.bad {
			t.Errorf("%s: violations %v, want any: %v", tc.name, r.Violations, tc.bad)
		}
	}
}
