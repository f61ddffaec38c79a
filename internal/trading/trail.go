package trading

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/tick"
)

// TrailChange is a trailing stop in a position modify (docs/orders.md, «Trailing stops»): Set
// false leaves it alone; Set with neither Distance nor Pips removes it.
type TrailChange struct {
	Set      bool
	Distance *decimal.Decimal // price units
	Pips     *decimal.Decimal // pips: 10 points on a 3- or 5-digit instrument, one point otherwise
}

// maxTrailShare bounds a trail's distance as a share of the price: a trail a fifth of the price
// away is no stop a trader means, and almost surely a distance sent in the wrong unit.
var maxTrailShare = decimal.RequireFromString("0.2")

// trailWrite is what a modify writes for a trailing stop; write false leaves the columns alone.
type trailWrite struct {
	write           bool
	distance, level *decimal.Decimal // nil: removed
}

// pipOf is one pip of in: 10 points where the quote carries a fractional pip (3 or 5 digits).
func pipOf(in fx.Instrument) decimal.Decimal {
	if in.Digits == 3 || in.Digits == 5 {
		return in.Point.Mul(decimal.NewFromInt(10))
	}
	return in.Point
}

// resolveTrail checks a trailing stop change against in and the quote, and returns what to
// write. A trail starts at bid − distance for a BUY and ask + distance for a SELL; setting the
// distance the position already trails by keeps its level (a retried modify must not move it
// back), and removing a trail it does not have writes nothing.
func resolveTrail(in catalog.Instrument, p book.Position, q book.Quote, c TrailChange) (trailWrite, error) {
	if !c.Set {
		return trailWrite{}, nil
	}
	if c.Distance == nil && c.Pips == nil {
		return trailWrite{write: p.TrailDistance != nil}, nil
	}
	if c.Distance != nil && c.Pips != nil {
		return trailWrite{}, fx.Errorf(fx.EINVALID, "trailingStop takes distance or pips, not both.")
	}
	d := c.Distance
	if c.Pips != nil {
		v := c.Pips.Mul(pipOf(in.Instrument))
		d = &v
	}
	digits := int32(in.Digits)
	ref := q.Bid
	if p.Side == fx.Sell {
		ref = q.Ask
	}
	switch maxD := ref.Mul(maxTrailShare).Truncate(digits); {
	case !d.Equal(d.Truncate(digits)):
		return trailWrite{}, fx.Errorf(fx.EINVALID, "trailingStop distance %s has more decimals than %s quotes (%d).", d, in.Symbol, in.Digits)
	case d.LessThan(in.Point):
		return trailWrite{}, fx.Errorf(fx.EINVALID, "trailingStop distance %s is below %s's point (%s).", d, in.Symbol, in.Point)
	case d.GreaterThan(maxD):
		return trailWrite{}, fx.Errorf(fx.EINVALID, "trailingStop distance %s is more than a fifth of the price (at most %s).", d.StringFixed(digits), maxD.StringFixed(digits))
	}
	if p.TrailDistance != nil && p.TrailDistance.Equal(*d) {
		return trailWrite{}, nil
	}
	level := q.Bid.Sub(*d)
	if p.Side == fx.Sell {
		level = q.Ask.Add(*d)
	}
	dist := *d
	return trailWrite{write: true, distance: &dist, level: &level}, nil
}

// The modify's UPDATE of SL and TP, and the same with the trailing stop's columns.
const (
	modifyStopsSQL      = "UPDATE `fx_position` SET `sl` = ?, `tp` = ? WHERE `id` = ? AND `status` = 'OPEN'"
	modifyStopsTrailSQL = "UPDATE `fx_position` SET `trailDistance` = ?, `trailLevel` = ?, `sl` = ?, `tp` = ? WHERE `id` = ? AND `status` = 'OPEN'"
)

// sql is the modify's UPDATE: with the trailing stop's columns when it writes them (args).
func (w trailWrite) sql() string {
	if !w.write {
		return modifyStopsSQL
	}
	return modifyStopsTrailSQL
}

func (w trailWrite) args(args ...any) []any {
	if !w.write {
		return args
	}
	return append([]any{w.distance, w.level}, args...)
}

// change is what the risk engine must learn, if anything.
func (w trailWrite) change(id int64) []risk.Change {
	if !w.write {
		return nil
	}
	return []risk.Change{{Kind: risk.TrailSet, Position: risk.Position{ID: id, TrailDistance: floatOf(w.distance), TrailLevel: floatOf(w.level)}}}
}

// ModifyPositionTrail is ModifyPosition with a trailing stop change beside SL and TP.
func (s *Service) ModifyPositionTrail(ctx context.Context, userID, id int64, sl, tp StopChange, trail TrailChange) (book.Position, error) {
	return s.modifyPosition(ctx, userID, id, sl, tp, trail)
}

// CloseTrailing is the risk engine's close of a trailing stop that fired at level: the close
// stores the level it fired at on the position, in the close's own transaction (firedTrailLevel),
// so the record — the row and its position.closed event — shows where the stop stood when it
// closed the position, whatever happens to the process after the commit (docs/orders.md,
// «Trailing stops»).
func (r *RiskDesk) CloseTrailing(ctx context.Context, id, accountID int64, level float64, at tick.Quote) error {
	return r.close(withFiredTrail(ctx, id, level), id, accountID, fx.CloseTrailingStop, nil, at)
}

// firedTrail is the position and level a trailing stop fired at, carried by the close's context
// to the close's write (closeWrite.book), whichever path books it (desk-priced or the venue's).
type firedTrail struct {
	position int64
	level    float64
}

type firedTrailKey struct{}

func withFiredTrail(ctx context.Context, position int64, level float64) context.Context {
	return context.WithValue(ctx, firedTrailKey{}, firedTrail{position, level})
}

// storeFiredTrailSQL records, in a TRAILING_STOP close's transaction, the level the stop fired at.
const storeFiredTrailSQL = "UPDATE `fx_position` SET `trailLevel` = ? WHERE `id` = ? AND `trailDistance` IS NOT NULL"

// firedTrailLevel sets on locked position p, closed whole by its trailing stop, the level the
// stop fired at when ctx carries it for p (CloseTrailing), and adds its write to the batch: the
// close and the level commit together. Before, the level was stored by a transaction of its own
// after the close's commit; a holder that lost the lease (or its database connection) in between
// left the closed position with the last flushed level — up to a flush interval behind the one
// the close used, or a trail the trader had set again meanwhile — and its position.closed event
// carried that stale level too. The level is on the instrument's grid (both the market's prices
// and the distance are), so the float is rounded to it.
func firedTrailLevel(ctx context.Context, r *book.Rows, p *book.Position, in catalog.Instrument) {
	f, ok := ctx.Value(firedTrailKey{}).(firedTrail)
	if !ok || f.position != p.ID || p.TrailDistance == nil || !p.Volume.IsZero() {
		return
	}
	level := decimal.NewFromFloat(f.level).Round(int32(in.Digits))
	p.TrailLevel = &level
	r.Writes.Exec(storeFiredTrailSQL, level, p.ID)
}

// trailChunk bounds one flush statement's rows.
const trailChunk = 500

// StoreTrailLevels writes the moved levels of trailing stops in multi-row statements of at most
// trailChunk rows, each in a fenced transaction (a holder that lost the lease writes nothing).
// A level only tightens what is stored — GREATEST for a BUY, LEAST for a SELL — so a late or
// stale write never loosens a stop; and it is written only while the position still trails by
// the distance it was computed for, so a flush racing a trader's new distance cannot restore
// the old trail's level. Only OPEN positions are written: a fired trail's level is the close's
// to store (firedTrailLevel).
func (s *Service) StoreTrailLevels(ctx context.Context, levels []risk.TrailLevel) error {
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return err
	}
	for len(levels) > 0 {
		n := min(len(levels), trailChunk)
		if err := s.storeTrailChunk(ctx, cat, levels[:n]); err != nil {
			return err
		}
		levels = levels[n:]
	}
	return nil
}

func (s *Service) storeTrailChunk(ctx context.Context, cat *catalog.Catalog, levels []risk.TrailLevel) error {
	var rows strings.Builder
	args := make([]any, 0, 3*len(levels))
	for i, l := range levels {
		if i > 0 {
			rows.WriteString(" UNION ALL ")
		}
		rows.WriteString("SELECT ? AS `id`, ? AS `lvl`, ? AS `d`")
		digits := int32(8)
		if in, ok := cat.Instruments[l.Symbol]; ok {
			digits = int32(in.Digits)
		}
		// Both the market's prices and the distance sit on the instrument's grid, so the exact
		// level is the float rounded to it.
		args = append(args, l.PositionID, decimal.NewFromFloat(l.Level).Round(digits), decimal.NewFromFloat(l.Distance).Round(digits))
	}
	stmt := "UPDATE `fx_position` p JOIN (" + rows.String() + ") v ON p.`id` = v.`id` " +
		"SET p.`trailLevel` = CASE WHEN p.`trailLevel` IS NULL THEN v.`lvl` WHEN p.`side` = 'BUY' THEN GREATEST(p.`trailLevel`, v.`lvl`) ELSE LEAST(p.`trailLevel`, v.`lvl`) END " +
		"WHERE p.`trailDistance` IS NOT NULL AND p.`status` = 'OPEN' AND p.`trailDistance` = v.`d`"
	tx, b, err := s.begin(ctx, gate.TrailFlush, "store trailing levels")
	if err != nil {
		return err
	}
	defer tx.Rollback()
	b.Exec(stmt, args...)
	if err := tx.Commit(ctx, b); err != nil {
		return fmt.Errorf("store %d trailing levels: %w", len(levels), err)
	}
	return nil
}

// FlushTrails stores the trailing-stop levels the engine moved (moved, the engine's
// MovedTrails) every interval until ctx ends, and once more as it ends, so a graceful stop
// loses nothing. A batch that fails is kept and written with the next one, tightest level per
// position first: a takeover after a failed flush loses at most the moves since the last one
// that succeeded (docs/orders.md, «Trailing stops»).
func (r *RiskDesk) FlushTrails(ctx context.Context, every time.Duration, moved func([]risk.TrailLevel) []risk.TrailLevel) {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var pending []risk.TrailLevel
	flush := func(ctx context.Context) {
		pending = tightest(moved(pending))
		if len(pending) == 0 {
			return
		}
		if err := r.svc.StoreTrailLevels(ctx, pending); err != nil {
			if ctx.Err() == nil {
				r.svc.log.WarnContext(ctx, "trailing levels not stored; kept for the next flush", slog.Int("levels", len(pending)), slog.Any("err", err))
			}
			return
		}
		pending = pending[:0]
	}
	for {
		select {
		case <-ctx.Done():
			// The lease is still held while guarded work stops: one last flush, on its own
			// deadline.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			flush(last)
			cancel()
			return
		case <-t.C:
			flush(ctx)
		}
	}
}

// tightest keeps one level per position, the one furthest in the trader's favour (a batch kept
// from a failed flush beside the next moves).
func tightest(ls []risk.TrailLevel) []risk.TrailLevel {
	if len(ls) < 2 {
		return ls
	}
	at := make(map[int64]int, len(ls))
	out := ls[:0]
	for _, l := range ls {
		i, seen := at[l.PositionID]
		switch {
		case !seen:
			at[l.PositionID] = len(out)
			out = append(out, l)
		case (l.Side == risk.Buy && l.Level > out[i].Level) || (l.Side == risk.Sell && l.Level < out[i].Level) || l.Distance != out[i].Distance:
			out[i] = l
		}
	}
	return out
}
