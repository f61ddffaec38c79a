package execution

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/hedge"
	"fxdesk/internal/venue"
)

// gatherHedge reads the hedge book into d and, into v, what the venue says of it: the trade of
// every open hedge position the listing lacks, and the lookups by client id of every SENDING
// hedge order (only the order lookup when the listing already carries its trade).
func (r *Reconciler) gatherHedge(ctx context.Context, v *VenueState, d *DeskState, open map[string]venue.Trade, carried map[string]bool, named []int64) error {
	d.HedgeOrders = map[string]HedgeOrder{}
	if r.cfg.Hedge == nil {
		return nil
	}
	positions, orders, err := r.cfg.Hedge.State(ctx, named)
	if err != nil {
		return fmt.Errorf("reconcile: hedge book: %w", err)
	}
	for _, p := range positions {
		d.HedgePositions = append(d.HedgePositions, HedgePosition{PositionID: p.PositionID, OrderID: p.OrderID, Symbol: p.Symbol, Units: p.Units, TradeID: p.TradeID})
		if t, isOpen := open[p.TradeID]; isOpen && t.CurrentUnits.Equal(p.Units) {
			continue
		}
		t, found, err := r.cfg.Venue.TradeByID(ctx, p.TradeID)
		if err != nil {
			return fmt.Errorf("reconcile: hedge trade %s: %w", p.TradeID, err)
		}
		if found {
			v.Trades[p.TradeID] = t
		}
	}
	for _, o := range orders {
		cid := hedge.ClientID(o.OrderID)
		d.HedgeOrders[cid] = HedgeOrder{OrderID: o.OrderID, ClientID: cid, Symbol: o.Symbol, Units: o.Units, Status: o.Status, SentAt: o.SentAt,
			PositionID: o.PositionID, PositionOpen: o.PositionOpen, TradeID: o.TradeID, LastVenueTx: o.LastVenueTx, Reduces: o.Reduces, Leave: o.Leave}
		switch {
		case r.cfg.Hedge.Busy(o.OrderID, 0), o.Reduces != 0:
			// A reduction is resolved from its hedge position's trade, read above; the venue
			// knows no client id of it.
			continue
		case carried[cid]:
			if o.PositionID != 0 || (o.Status != hedge.StatusSending && o.Status != hedge.StatusNotSent) {
				continue
			}
			info, found, err := r.cfg.Venue.OrderByClientID(ctx, cid)
			if err != nil {
				return fmt.Errorf("reconcile: order @%s: %w", cid, err)
			}
			if found {
				v.ByClientID[cid] = ClientLookup{Order: &info}
			}
			continue
		case o.Status != hedge.StatusSending:
			continue
		}
		var lk ClientLookup
		if info, found, err := r.cfg.Venue.OrderByClientID(ctx, cid); err != nil {
			return fmt.Errorf("reconcile: order @%s: %w", cid, err)
		} else if found {
			lk.Order = &info
		}
		if t, found, err := r.cfg.Venue.TradeByClientID(ctx, cid); err != nil {
			return fmt.Errorf("reconcile: trade @%s: %w", cid, err)
		} else if found {
			lk.Trade = &t
		}
		v.ByClientID[cid] = lk
	}
	return nil
}

// doHedge carries out one action on the hedge book.
func (r *Reconciler) doHedge(ctx context.Context, a Action, log *slog.Logger) error {
	h := r.cfg.Hedge
	if h == nil && a.Kind != ReportHedge {
		return fmt.Errorf("%s: no hedge book on this desk", a.Kind)
	}
	switch a.Kind {
	case AdoptHedge, AdoptHedgeClosed:
		if a.Units == nil {
			return fmt.Errorf("adopt hedge order %d: no units", a.OrderID)
		}
		pos, err := h.Adopt(ctx, hedge.Adoption{OrderID: a.OrderID, TradeID: a.TradeID, Units: *a.Units, Price: a.Price, OpenedAt: a.OpenedAt,
			VenueOrderID: a.VenueOrderID, TransactionID: a.TransactionID})
		if err != nil {
			return err
		}
		log.InfoContext(ctx, "adopted a venue trade into the hedge book for the hedge order that sent it; not reopened",
			slog.Int64("hedge_order_id", a.OrderID), slog.Int64("hedge_position_id", pos.ID))
		if a.Kind == AdoptHedgeClosed {
			if err := h.BookClose(ctx, pos.ID, a.ClosePrice, a.CloseTransactionID, a.ClosedAt, hedge.CloseVenue); err != nil {
				return err
			}
			log.InfoContext(ctx, "booked the venue's close of the adopted hedge trade", slog.Int64("hedge_position_id", pos.ID), slog.String("price", a.ClosePrice.String()))
		}
	case MarkHedgeNotSent:
		if err := h.EndOrder(ctx, a.OrderID, hedge.StatusNotSent, "no trace at the venue by its client id"); err != nil {
			return err
		}
		log.WarnContext(ctx, "hedge order has no trace at the venue; marked NOT_SENT, never re-sent", slog.Int64("hedge_order_id", a.OrderID))
	case MarkHedgeRejected:
		if err := h.EndOrder(ctx, a.OrderID, hedge.StatusRejected, a.Reason); err != nil {
			return err
		}
		log.InfoContext(ctx, "the venue cancelled the hedge order; marked REJECTED", slog.Int64("hedge_order_id", a.OrderID))
	case CloseHedgeSide:
		if err := h.BookClose(ctx, a.PositionID, a.Price, a.TransactionID, a.ClosedAt, hedge.CloseVenue); err != nil {
			return err
		}
		log.InfoContext(ctx, "closed a hedge position the venue closed, at the venue's price", slog.Int64("hedge_position_id", a.PositionID), slog.String("price", a.Price.String()))
	case BookHedgePartial:
		if a.Units == nil {
			return fmt.Errorf("book hedge partial %d: no units", a.PositionID)
		}
		if err := h.BookPartial(ctx, a.PositionID, *a.Units, a.Price, a.TransactionID); err != nil {
			return err
		}
		log.InfoContext(ctx, "booked the share of a hedge trade the venue closed itself", slog.Int64("hedge_position_id", a.PositionID),
			slog.String("units_left", a.Units.String()), slog.String("average_close_price", a.Price.String()))
	case ResolveHedgeReduce:
		units := decimal.Zero
		if a.Units != nil {
			units = *a.Units
		}
		if err := h.ResolveReduce(ctx, a.OrderID, units, a.Price, a.TransactionID); err != nil {
			return err
		}
		log.InfoContext(ctx, "resolved a hedge reduction from its venue trade; not re-sent", slog.Int64("hedge_order_id", a.OrderID),
			slog.Int64("hedge_position_id", a.PositionID), slog.String("units_left", units.String()))
	case ReportHedge:
		units := ""
		if a.Units != nil {
			units = a.Units.String()
		}
		return r.cfg.Alerts.Raise(ctx, AlertUntaggedTrade, alert.Warning,
			fmt.Sprintf("Venue trade %s (%s, %s units) carries a hedge-book client id that this desk's hedge book does not explain: the desk never touches it. Another desk shares the venue account, or the hedge book was changed by hand.", a.TradeID, a.Symbol, units),
			map[string]any{"tradeId": a.TradeID, "symbol": a.Symbol, "units": units, "hedge": true})
	}
	return nil
}
