package invariant

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// TrailSample is the trailing stops the database held at At (docs/orders.md, «Trailing stops»):
// every OPEN position with one, and every position a trailing stop closed.
type TrailSample struct {
	At     time.Time    `json:"at"`
	Trails []TrailState `json:"trails"`
}

// TrailState is one position's stored trailing stop.
type TrailState struct {
	Position int64           `json:"position"`
	Side     string          `json:"side"`
	Status   string          `json:"status"`
	Distance decimal.Decimal `json:"distance"`
	Level    decimal.Decimal `json:"level"`
	Closed   bool            `json:"closed"` // closed with reason TRAILING_STOP
}

// trailCloseSlack is how far past its level a TRAILING_STOP close may be: the close is priced
// at the quote its batch reads, a few milliseconds after the quote that fired it, so a market
// that turns within those milliseconds moves it a little.
var trailCloseSlack = decimal.RequireFromString("0.001") // of the level

// checkTrailMonotonic: "trailing levels never move against the trader". Between two samples of
// one position trailing by one distance, a BUY's stored level never falls and a SELL's never
// rises — unless a trailingStop modify of that position was in flight between them (a trader
// setting a trail starts it again from the market).
func checkTrailMonotonic(_ *Snapshot, ev *Evidence) Result {
	r := Result{Name: "trailLevelsMonotonic"}
	sets := map[int64][]Entry{}
	for _, e := range ev.Journal {
		if e.Op == "trailingStop" {
			var id int64
			if _, err := fmt.Sscanf(e.Path, "/api/fx/positions/%d", &id); err == nil {
				sets[id] = append(sets[id], e)
			}
		}
	}
	samples := append([]TrailSample(nil), ev.Trails...)
	sort.SliceStable(samples, func(i, j int) bool { return samples[i].At.Before(samples[j].At) })
	type seen struct {
		at time.Time
		st TrailState
	}
	last := map[int64]seen{}
	judged := 0
	for _, s := range samples {
		for _, st := range s.Trails {
			prev, ok := last[st.Position]
			last[st.Position] = seen{s.At, st}
			if !ok || !prev.st.Distance.Equal(st.Distance) || prev.st.Level.Equal(st.Level) {
				continue
			}
			judged++
			against := (st.Side == "BUY" && st.Level.LessThan(prev.st.Level)) || (st.Side == "SELL" && st.Level.GreaterThan(prev.st.Level))
			if !against || modifiedBetween(sets[st.Position], prev.at, s.At) {
				continue
			}
			r.Violations = append(r.Violations, Violation{Key: fmt.Sprintf("trail %d", st.Position),
				Text: fmt.Sprintf("position %d (%s) trailing stop moved against the trader from %s to %s between %s and %s with no modify in flight",
					st.Position, st.Side, prev.st.Level, st.Level, prev.at.Format(time.RFC3339Nano), s.At.Format(time.RFC3339Nano))})
		}
	}
	r.Figures = fmt.Sprintf("%d trail samples, %d positions trailed, %d moves judged", len(samples), len(last), judged)
	return r
}

func modifiedBetween(es []Entry, from, to time.Time) bool {
	for _, e := range es {
		if e.Start.Before(to) && (e.End.IsZero() || e.End.After(from)) {
			return true
		}
	}
	return false
}

// checkTrailCloses: "a TRAILING_STOP close happened at or beyond its stored level's side": a
// BUY closed at or under the level it fired at, a SELL at or over it (within trailCloseSlack).
// The close stores that level in its own transaction (docs/orders.md, «Trailing stops»).
//
// A FIFO account's closes are not judged: a trailing stop that fires on a position that is not
// the oldest closes the oldest ones with reason TRAILING_STOP in its place (docs/orders.md,
// «Position modes»), and each of those keeps its own trailing stop, if it has one, at a level the
// market never reached — the stop that fired was another position's, removed from it.
func checkTrailCloses(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "trailClosesAtTheirLevel"}
	fifo := modeAccounts(s, "FIFO")
	level := map[int64]TrailState{}
	for _, smp := range ev.Trails {
		for _, st := range smp.Trails {
			if st.Closed {
				level[st.Position] = st
			}
		}
	}
	price := map[int64]decimal.Decimal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && d.Price.Valid && strings.HasPrefix(d.Key, "close:") {
			price[d.Position.Int64] = d.Price.Decimal // a trailing stop closes the whole position: one close deal
		}
	}
	n, fifoCloses := 0, 0
	for _, p := range s.Positions {
		if !p.CloseReason.Valid || p.CloseReason.String != "TRAILING_STOP" {
			continue
		}
		if fifo[p.Account] {
			fifoCloses++
			continue
		}
		st, ok := level[p.ID]
		px, priced := price[p.ID]
		if !ok || !priced {
			continue // closed after the last sample, or no close deal read
		}
		n++
		slack := st.Level.Mul(trailCloseSlack)
		if (p.Side == "BUY" && px.GreaterThan(st.Level.Add(slack))) || (p.Side == "SELL" && px.LessThan(st.Level.Sub(slack))) {
			r.Violations = append(r.Violations, Violation{Key: fmt.Sprintf("trail close %d", p.ID),
				Text: fmt.Sprintf("position %d (%s) closed by TRAILING_STOP at %s, on the wrong side of its level %s", p.ID, p.Side, px, st.Level)})
		}
	}
	r.Figures = fmt.Sprintf("%d TRAILING_STOP closes judged, %d on FIFO accounts not judged", n, fifoCloses)
	return r
}
