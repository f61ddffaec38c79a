package trading

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
)

// Closes on a FIFO account (docs/orders.md, «Position modes»; NFA Compliance Rule 2-43b): the
// oldest open position of a symbol is closed first. A FIFO account never holds both sides of a
// symbol (an opposite fill closes, netting.go), so its positions of a symbol form one queue,
// oldest first.
//
//   - A trader's close of a position that is not the oldest is refused, naming the oldest.
//   - A stop that triggers on a position that is not the oldest — SL, TP, a trailing stop, a
//     stop-out — closes the same volume from the oldest positions first (partly closing the
//     last one it reaches), each with the stop's reason, and the stop that fired is removed
//     from the position it was set on, which stays open with what the older ones took for it:
//     the account ends where the stop meant it to end, with its oldest lots gone.
//   - A dealer's close (reason DEALER) closes what the dealer named: it is the desk's own
//     correction, not the trader's instruction the rule is about.

// fifoClose is a stop's close that the oldest positions took instead of the position it fired
// on (fifoApply).
type fifoClose struct {
	legs   []*book.Position // the positions closed or reduced, oldest first
	target *book.Position   // the position the stop fired on (among legs when reached)
	trades []routing.Profile
}

// fifoApply applies close w of vol lots of locked position p at price on a FIFO account: it
// refuses a trader's close of a position that is not the oldest, and redirects a stop's close
// to the oldest positions. handled is false when the close goes on as on any account (not FIFO,
// a dealer's close, or p is the oldest).
func (w *closeWrite) fifoApply(r *book.Rows, a *book.Account, p *book.Position, in catalog.Instrument, vol, price decimal.Decimal) (handled bool, err error) {
	if w.reason == fx.CloseDealer || positionModeOf(r.Catalog, a) != fx.FIFO {
		return false, nil
	}
	held, read := r.HeldPositions(a.ID, p.Symbol)
	if !read {
		return true, errPlanAgain
	}
	queue := fifoQueue(held, p)
	if len(queue) == 1 {
		return false, nil // p is the oldest
	}
	if w.reason == fx.CloseClient {
		return true, fx.Errorf(fx.ECONFLICT, "FIFO: close position %d first. Account %d is FIFO (NFA Compliance Rule 2-43b): its oldest open %s position is closed first, and position %d is newer.",
			queue[0].ID, a.ID, p.Symbol, p.ID)
	}
	f := &fifoClose{target: p}
	rest := vol
	for _, h := range queue {
		if !rest.IsPositive() {
			break
		}
		v := decimal.Min(rest, h.Volume)
		key := "close:" + itoa(h.ID) + ":" + h.Volume.String()
		idx, trade, err := closeLeg(r, a, in, h, "", v, price, w.reason, book.Deal{IdempotencyKey: key}, w.s.term())
		if err != nil {
			return true, err
		}
		if err := w.addStopOut(r, a, h.Position, v, price, r.Deals[idx].Amount); err != nil {
			return true, err
		}
		if w.deal < 0 {
			w.deal = idx
		}
		f.legs, f.trades = append(f.legs, h.Position), append(f.trades, trade)
		rest = rest.Sub(v)
	}
	if p.Status == fx.PositionOpen {
		if err := w.s.removeFiredStop(r, a, p, w.reason); err != nil {
			return true, err
		}
	}
	w.fifo, w.res.Position, w.a = f, *p, *a
	return true, nil
}

// fifoQueue is held's positions on p's side up to and including p, oldest first: what a close of
// p takes from, in order.
func fifoQueue(held []*book.Held, p *book.Position) []*book.Held {
	var q []*book.Held
	for _, h := range held {
		if h.Side != p.Side || h.Var != "" {
			continue
		}
		q = append(q, h)
		if h.ID == p.ID {
			return q
		}
	}
	return q
}

// removeFiredStop removes from locked position p the stop that fired for reason (SL, TP or the
// trailing stop; a stop-out sets none), so it does not fire again for lots older positions
// closed in its place.
func (s *Service) removeFiredStop(r *book.Rows, a *book.Account, p *book.Position, reason fx.CloseReason) error {
	switch reason {
	case fx.CloseSL:
		p.SL = nil
		r.Writes.Exec("UPDATE `fx_position` SET `sl` = NULL WHERE `id` = ?", p.ID)
	case fx.CloseTP:
		p.TP = nil
		r.Writes.Exec("UPDATE `fx_position` SET `tp` = NULL WHERE `id` = ?", p.ID)
	case fx.CloseTrailingStop:
		p.TrailDistance, p.TrailLevel = nil, nil
		r.Writes.Exec("UPDATE `fx_position` SET `trailDistance` = NULL, `trailLevel` = NULL WHERE `id` = ?", p.ID)
	default:
		return nil
	}
	return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.PositionModified, Payload: events.PositionOf(*p), Term: s.term()})
}

// committed is the redirected close as committed: the risk engine learns each leg, and the
// position the stop fired on comes back under watch without that stop (re-added whole, which
// also ends the engine's close of it).
func (f *fifoClose) committed(w *closeWrite) []risk.Change {
	var changes []risk.Change
	for _, p := range f.legs {
		switch {
		case p.ID == f.target.ID:
			continue // below
		case p.Status == fx.PositionClosed:
			changes = append(changes, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: p.ID}})
			continue
		}
		changes = append(changes, risk.Change{Kind: risk.PositionReduced, Position: risk.Position{ID: p.ID, Volume: p.Volume.InexactFloat64()}})
	}
	if f.target.Status == fx.PositionClosed {
		w.s.links.drop(f.target.ID)
		changes = append(changes, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: f.target.ID}})
	} else {
		changes = append(changes, positionOpened(*f.target))
	}
	for _, t := range f.trades {
		w.s.profiles.closed(w.a.ID, t)
	}
	return append(changes, balanceChanged(w.a))
}
