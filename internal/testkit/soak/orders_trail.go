package soak

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/testkit/soak/invariant"
)

// trailAction sets, changes or removes the trailing stop of one of the trader's open positions
// (docs/orders.md, «Trailing stops»): in pips most of the time, as a distance now and then, and
// removed one time in five. A position found closed is forgotten.
func (t *trader) trailAction(ctx context.Context) {
	id, _, ok := t.pick()
	if !ok {
		return
	}
	var trail any
	switch r := t.intN(5); {
	case r == 0: // removed: null
	case r == 1:
		// A distance every soak symbol can quote (two decimals), far enough to rarely fire.
		trail = map[string]any{"distance": decimal.New(int64(5+t.intN(5)), -2).String()}
	default:
		trail = map[string]any{"pips": 5 + t.intN(40)}
	}
	e := t.j.call(ctx, t.deskWeb(), t.token, t.name, "trailingStop", http.MethodPatch, fmt.Sprintf("/api/fx/positions/%d", id),
		map[string]any{"trailingStop": trail})
	if e.Outcome == invariant.Answered && (e.Status == http.StatusNotFound || e.Status == http.StatusConflict) {
		t.mu.Lock()
		delete(t.positions, id)
		t.mu.Unlock()
	}
}

// trailSamples are the trailing stops the sampler read, every sample (invariant.TrailSample).
type trailSamples struct {
	mu      sync.Mutex
	samples []invariant.TrailSample
}

// sample reads every OPEN position's trailing stop and every TRAILING_STOP close's stored level.
func (ts *trailSamples) sample(ctx context.Context, db *sql.DB) {
	if db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	s := invariant.TrailSample{At: time.Now()}
	rows, err := db.QueryContext(ctx, "SELECT `id`, `side`, `status`, `trailDistance`, `trailLevel`, COALESCE(`closeReason` = 'TRAILING_STOP', FALSE) "+
		"FROM `fx_position` WHERE `trailDistance` IS NOT NULL AND `trailLevel` IS NOT NULL AND (`status` = 'OPEN' OR `closeReason` = 'TRAILING_STOP')")
	if err != nil {
		return // a sample missed; the next one reads it
	}
	defer rows.Close()
	for rows.Next() {
		var st invariant.TrailState
		if rows.Scan(&st.Position, &st.Side, &st.Status, &st.Distance, &st.Level, &st.Closed) != nil {
			return
		}
		s.Trails = append(s.Trails, st)
	}
	if rows.Err() != nil {
		return
	}
	ts.mu.Lock()
	ts.samples = append(ts.samples, s)
	ts.mu.Unlock()
}

func (ts *trailSamples) all() []invariant.TrailSample {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]invariant.TrailSample(nil), ts.samples...)
}
