package invariant

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func trailAt(sec float64) time.Time {
	return time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
}

func trailState(pos int64, side, level string, closed bool) TrailState {
	return TrailState{Position: pos, Side: side, Status: "OPEN", Distance: decimal.RequireFromString("0.002"), Level: decimal.RequireFromString(level), Closed: closed}
}

// The monotonic judge over a BUY (1) and a SELL (2): moves in the trader's favour pass; a move
// against the trader fails, unless a trailingStop modify of that position was in flight.
func TestTrailMonotonicJudge(t *testing.T) {
	t.Parallel()
	base := func() *Evidence {
		return &Evidence{Trails: []TrailSample{
			{At: trailAt(0), Trails: []TrailState{trailState(1, "BUY", "1.0980", false), trailState(2, "SELL", "1.1020", false)}},
			{At: trailAt(1), Trails: []TrailState{trailState(1, "BUY", "1.0990", false), trailState(2, "SELL", "1.1010", false)}},
			{At: trailAt(2), Trails: []TrailState{trailState(1, "BUY", "1.0990", false), trailState(2, "SELL", "1.1010", false)}},
		}}
	}
	cases := []struct {
		name  string
		plant func(ev *Evidence)
		want  string
	}{
		{"both trail in the trader's favour", func(*Evidence) {}, ""},
		{"a BUY level falls", func(ev *Evidence) { ev.Trails[2].Trails[0].Level = decimal.RequireFromString("1.0985") }, "position 1 (BUY) trailing stop moved against the trader"},
		{"a SELL level rises", func(ev *Evidence) { ev.Trails[2].Trails[1].Level = decimal.RequireFromString("1.1015") }, "position 2 (SELL) trailing stop moved against the trader"},
		{"a BUY level falls while its trader set the trail again", func(ev *Evidence) {
			ev.Trails[2].Trails[0].Level = decimal.RequireFromString("1.0985")
			ev.Journal = append(ev.Journal, Entry{Op: "trailingStop", Path: "/api/fx/positions/1", Start: trailAt(1.5), End: trailAt(1.6)})
		}, ""},
		{"a modify of another position excuses nothing", func(ev *Evidence) {
			ev.Trails[2].Trails[0].Level = decimal.RequireFromString("1.0985")
			ev.Journal = append(ev.Journal, Entry{Op: "trailingStop", Path: "/api/fx/positions/2", Start: trailAt(1.5), End: trailAt(1.6)})
		}, "position 1 (BUY)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ev := base()
			c.plant(ev)
			r := checkTrailMonotonic(&Snapshot{}, ev)
			judgeTrail(t, r, c.want)
		})
	}
}

// The close judge: a BUY closed by TRAILING_STOP at or under its level passes, over it (past
// the slack) fails; a SELL mirrors it.
func TestTrailClosesJudge(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, side, level, price, mode, want string
	}{
		{"a BUY closed under its level", "BUY", "1.0990", "1.0985", "HEDGING", ""},
		{"a BUY closed over its level", "BUY", "1.0990", "1.1010", "HEDGING", "closed by TRAILING_STOP at 1.101, on the wrong side of its level 1.099"},
		{"a SELL closed over its level", "SELL", "1.1010", "1.1012", "HEDGING", ""},
		{"a SELL closed under its level", "SELL", "1.1010", "1.0990", "HEDGING", "on the wrong side"},
		// The oldest SELL of a FIFO account, trailing at the market by 20 pips, closed in place of a
		// newer one whose trail fired: its own level is close + 20 pips, and it is no evidence.
		{"a FIFO account's oldest SELL closed for a newer one's trail", "SELL", "1.1010", "1.0990", "FIFO", ""},
		{"a NETTING account's SELL closed under its level", "SELL", "1.1010", "1.0990", "NETTING", "on the wrong side"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &Snapshot{
				Accounts:      []dbAccount{{ID: 3, Group: "g"}},
				PositionModes: map[string]string{"g": c.mode},
				Positions:     []dbPosition{{ID: 7, Account: 3, Side: c.side, Status: "CLOSED", CloseReason: sql.NullString{String: "TRAILING_STOP", Valid: true}}},
				Deals: []dbDeal{{ID: 1, Type: "PROFIT", Key: "close:7", Position: sql.NullInt64{Int64: 7, Valid: true},
					Price: decimal.NullDecimal{Decimal: decimal.RequireFromString(c.price), Valid: true}}},
			}
			ev := &Evidence{Trails: []TrailSample{{At: trailAt(0), Trails: []TrailState{trailState(7, c.side, c.level, true)}}}}
			judgeTrail(t, checkTrailCloses(s, ev), c.want)
		})
	}
}

func judgeTrail(t *testing.T, r Result, want string) {
	t.Helper()
	if want == "" {
		if len(r.Violations) != 0 {
			t.Fatalf("%s: violations %+v, want none", r.Name, r.Violations)
		}
		return
	}
	for _, v := range r.Violations {
		if strings.Contains(v.Text, want) {
			return
		}
	}
	t.Fatalf("%s: violations %+v, want one containing %q", r.Name, r.Violations, want)
}
