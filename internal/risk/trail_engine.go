package risk

import (
	"context"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// TrailCloser is an Executor that records the level a trailing stop fired at beside its close
// (reason fx.CloseTrailingStop), so the stored level is the one the close was decided at. An
// Executor without it gets Close with that reason.
type TrailCloser interface {
	CloseTrailing(ctx context.Context, positionID, accountID int64, level float64, at tick.Quote) error
}

// TrailLevel is one trailing stop's level as the engine holds it (MovedTrails).
type TrailLevel struct {
	PositionID int64
	Symbol     string
	Side       Side
	Distance   float64
	Level      float64
}

func (b *book) trails(s Side) *trailBook {
	if s == Buy {
		return b.buyTrail
	}
	return b.sellTrail
}

// relinkTrail follows a trail book's rebuild, which renumbers its nodes.
func (v *view) relinkTrail(pos, node int32) { v.pos[pos].tnode = node + 1 }

// indexTrailLocked puts p's trailing stop, if it has one, into its book at its level.
func (e *Engine) indexTrailLocked(idx int32) {
	p := &e.pos[idx]
	if !validTrail(p.trailD) || p.tlevel <= 0 || p.tnode > 0 {
		return
	}
	p.tnode = e.books[p.sym].trails(p.side).add(idx, p.trailD, p.tlevel) + 1
}

// unindexTrailLocked takes p's trailing stop out of its book, keeping its level in p.
func (e *Engine) unindexTrailLocked(idx int32) {
	p := &e.pos[idx]
	if p.tnode == 0 {
		return
	}
	t := e.books[p.sym].trails(p.side)
	n := p.tnode - 1
	p.tlevel, p.tnode = t.level(n), 0
	t.remove(n)
}

// setTrailLocked follows a TrailSet change. While the position is closing, its new trail waits
// in it, indexed if the close does not happen.
func (e *Engine) setTrailLocked(ps Position) {
	idx, ok := e.posByID[ps.ID]
	if !ok {
		return
	}
	p := &e.pos[idx]
	if !p.closing {
		e.unindexTrailLocked(idx)
	}
	p.trailD, p.tlevel = ps.TrailDistance, ps.TrailLevel
	if !p.closing {
		e.indexTrailLocked(idx)
	}
}

// fireTrailsLocked hands off every trailing stop the quote reaches (reason TRAILING_STOP, with
// the level it fired at), then moves the trails the quote makes a new high (or low) for. A
// position another stop of which already fired on this quote is closed once, for that stop.
func (e *Engine) fireTrailsLocked(b *book, px *pricer, arrived time.Time) {
	for _, tr := range [...]struct {
		t     *trailBook
		price float64
	}{{b.buyTrail, px.q.Bid}, {b.sellTrail, px.q.Ask}} {
		if tr.t.live == 0 {
			continue
		}
		e.trailHits = tr.t.fire(e.trailHits[:0], tr.price)
		for _, h := range e.trailHits {
			p := &e.pos[h.pos]
			p.tnode, p.tlevel = 0, h.level
			if p.closing {
				continue
			}
			p.closing = true
			e.firing = append(e.firing, h.pos)
			e.closesQueued.Add(1)
			e.handOffLocked(job{kind: jobClose, idx: h.pos, id: p.id, account: e.accts[p.acct].ID, reason: fx.CloseTrailingStop,
				symbol: b.symbol, quote: px.q, arrived: arrived, level: h.level})
		}
		tr.t.move(tr.price)
	}
}

// MovedTrails appends to dst every watched trailing stop whose level moved since the last call,
// at its level now: what the holder stores (docs/orders.md, «Trailing stops»). It walks only the
// groups of trails that moved. A trail whose close is in flight is not listed: its close
// records the level it fired at.
func (e *Engine) MovedTrails(dst []TrailLevel) []TrailLevel {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drainLocked(context.Background())
	for _, b := range e.books {
		for _, t := range [...]*trailBook{b.buyTrail, b.sellTrail} {
			if len(t.dirty) == 0 {
				continue
			}
			e.trailHits = t.moved(e.trailHits[:0])
			for _, h := range e.trailHits {
				p := &e.pos[h.pos]
				dst = append(dst, TrailLevel{PositionID: p.id, Symbol: b.symbol, Side: p.side, Distance: p.trailD, Level: h.level})
			}
		}
	}
	return dst
}

// TrailOf is position id's trailing stop as the engine holds it now; ok is false when the
// engine watches no trailing stop on it.
func (e *Engine) TrailOf(id int64) (t TrailLevel, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.drainLocked(context.Background())
	idx, found := e.posByID[id]
	if !found {
		return TrailLevel{}, false
	}
	p := &e.pos[idx]
	if p.tnode == 0 {
		return TrailLevel{}, false
	}
	return TrailLevel{PositionID: id, Symbol: e.books[p.sym].symbol, Side: p.side, Distance: p.trailD, Level: e.books[p.sym].trails(p.side).level(p.tnode - 1)}, true
}
