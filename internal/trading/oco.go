package trading

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// OCO pairs (docs/orders.md «OCO pairs»): two resting orders of one account, placed in one
// transaction, each naming the other in ocoOrderId. The pair is one decision:
//   - the fill of either leg cancels the other in the fill's own transaction (restingFill locks
//     both rows, so when both trigger on one gap the second finds its own row CANCELLED and
//     drops: exactly one fills);
//   - a cancel of either leg, by the trader or the dealer, cancels both;
//   - a leg that expires, or is rejected at its trigger (the account cannot carry it), ends
//     alone: nothing was decided, and the other leg rests on.
// A STOP_LIMIT leg whose stop triggers but does not fill yet is not a fill: its partner stays.

// OCORequest is a submitted OCO pair, decoded. The legs carry no account and no nonce of
// their own: the pair's requestNonce is stored on the first leg, and a retry returns the pair.
type OCORequest struct {
	AccountID    int64
	RequestNonce string
	Legs         [2]OrderRequest
}

// OCOResult is the pair placed (or found again: Replayed).
type OCOResult struct {
	Orders   [2]book.Order
	Replayed bool
}

// ocoLeg is one leg checked against its instrument and the quote.
type ocoLeg struct {
	r       OrderRequest
	in      catalog.Instrument
	q       book.Quote
	expires *time.Time
}

// PlaceOCO places an OCO pair for userID. Each leg passes the checks of a resting order of its
// own (type, price against the market, stops, the account group's terms, free margin as if it
// filled now); the pair takes two of the account's pending-order places. Errors: EINVALID,
// ENOTFOUND, ECONFLICT, EKEYREUSED, EUNAVAILABLE as PlaceOrder.
func (s *Service) PlaceOCO(ctx context.Context, userID int64, r OCORequest) (OCOResult, error) {
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return OCOResult{}, err
	}
	m := book.NewMarket(s.prices, cat)
	var legs [2]ocoLeg
	for i := range r.Legs {
		leg := r.Legs[i]
		leg.AccountID, leg.RequestNonce = r.AccountID, ""
		if legs[i], err = s.checkOCOLeg(cat, m, leg); err != nil {
			return OCOResult{}, ocoLegError(i, err)
		}
	}
	// The trader's profile, when a routing rule reads it, as PlaceOrder reads it.
	var prof routing.Profile
	if cat.RoutingUsesProfile {
		if prof, err = s.profileFor(ctx, r.AccountID); err != nil {
			return OCOResult{}, err
		}
	}
	var res OCOResult
	err = s.retry(ctx, func() (err error) {
		res, err = s.placeOCO(ctx, userID, r, legs, cat, m, prof)
		return err
	})
	if err != nil {
		return OCOResult{}, err
	}
	if !res.Replayed {
		s.notify(ctx, orderPlaced(res.Orders[0]), orderPlaced(res.Orders[1]))
	}
	return res, nil
}

// checkOCOLeg is PlaceOrder's checks of a resting order, for one leg.
func (s *Service) checkOCOLeg(cat *catalog.Catalog, m *book.Market, r OrderRequest) (ocoLeg, error) {
	switch r.Type {
	case fx.Limit, fx.Stop, fx.StopLimit:
	default:
		return ocoLeg{}, fx.Errorf(fx.EINVALID, "An OCO leg is a resting order: type LIMIT, STOP or STOP_LIMIT.")
	}
	in, ok := cat.Instruments[r.Symbol]
	if !ok || !in.Enabled {
		return ocoLeg{}, fx.Errorf(fx.EINVALID, "Unknown symbol %q.", r.Symbol)
	}
	switch in.Status {
	case fx.InstrumentHalted:
		return ocoLeg{}, fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", in.Symbol)
	case fx.InstrumentCloseOnly:
		return ocoLeg{}, fx.Errorf(fx.ECONFLICT, "%s is close-only: new positions and orders are refused.", in.Symbol)
	}
	if err := checkVolumeStep(in, r.Volume); err != nil {
		return ocoLeg{}, err
	}
	expires, err := s.checkOrderShape(in, &r)
	if err != nil {
		return ocoLeg{}, err
	}
	q, err := m.Tradable(in.Symbol)
	if err != nil {
		return ocoLeg{}, err
	}
	if err := checkRestingPrice(in, r, q); err != nil {
		return ocoLeg{}, err
	}
	if err := checkStops(in, r.Side, *r.Price, r.SL, r.TP); err != nil {
		return ocoLeg{}, err
	}
	return ocoLeg{r: r, in: in, q: q, expires: expires}, nil
}

// placeOCO is PlaceOCO's transaction, placeResting's for two orders: round trip one locks the
// account and reads, under that lock, a retried nonce, the open exposures and the pending
// orders; round trip two writes both legs, their links and their order.accepted events.
func (s *Service) placeOCO(ctx context.Context, userID int64, r OCORequest, legs [2]ocoLeg, cat *catalog.Catalog, m *book.Market, prof routing.Profile) (OCOResult, error) {
	tx, locks, err := s.begin(ctx, gate.Fill, "place OCO pair")
	if err != nil {
		return OCOResult{}, err
	}
	defer tx.Rollback()
	pl, err := lockPlacement(ctx, tx, locks, r.AccountID, r.RequestNonce, "place OCO pair")
	if err != nil {
		return OCOResult{}, err
	}
	a, found, retried, original, exps, pending := pl.a, pl.found, pl.retried, pl.original, pl.exps, pl.pending
	if err := book.OwnedBy(a, found, userID, r.AccountID); err != nil {
		return OCOResult{}, err
	}
	if retried {
		tx.Rollback()
		return s.replayOCO(ctx, userID, r, original)
	}
	if err := stateRefusal(a, actOpen); err != nil {
		return OCOResult{}, err
	}
	g := cat.AccountGroup(a.Group)
	limit, setting := s.settings.MaxPendingOrders(), "the desk's "+catalog.SettingMaxPendingOrders
	if g.MaxPendingOrders != nil {
		limit, setting = *g.MaxPendingOrders, "group "+g.Name+"'s maxPendingOrders"
	}
	if pending+2 > int64(limit) {
		return OCOResult{}, fx.Errorf(fx.ECONFLICT, "Account %d has %d pending orders and an OCO pair takes two more places; %s is %d: cancel one, or wait for one to fill or expire, before placing the pair.",
			a.ID, pending, setting, limit)
	}
	before, ok := m.Metrics(a, g, a.Balance, exps)
	if !ok {
		return OCOResult{}, book.ErrPricing()
	}
	if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
		return OCOResult{}, fx.Errorf(fx.ECONFLICT, "New orders are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
			before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
	}
	var out OCOResult
	for i, l := range legs {
		// Routed as a resting order is: at acceptance, and only to the desk.
		execution, rule, hedge := routeOf(cat, &a, l.in.Symbol, l.r.Volume, s.profileNow(cat, a.ID, prof))
		if execution == fx.External {
			return OCOResult{}, fx.Errorf(fx.EINVALID, "legs[%d]: account %d's orders of %s lots of %s are routed to the execution venue (%s), which takes MARKET orders only: resting orders are not routed there.",
				i, a.ID, l.r.Volume, l.in.Symbol, routedBy(rule))
		}
		t, _ := termsOf(cat, a.Group, l.in.Symbol)
		if err := checkOpen(t, l.r.Volume); err != nil {
			return OCOResult{}, err
		}
		// Each leg alone must fit the free margin, as a resting order does: only one can fill.
		if _, _, err := fillCheck(m, cat, t.Instrument, a, exps, l.r.Side, l.r.Volume, book.FillPrice(t.Instrument, l.q, l.r.Side)); err != nil {
			return OCOResult{}, ocoLegError(i, err)
		}
		out.Orders[i] = book.Order{AccountID: a.ID, Symbol: l.in.Symbol, Side: l.r.Side, Type: l.r.Type, Volume: l.r.Volume, Price: l.r.Price, LimitPrice: l.r.LimitPrice,
			SL: l.r.SL, TP: l.r.TP, TimeInForce: l.r.TimeInForce, ExpiresAt: l.expires, Status: fx.OrderPending, CreatedAt: s.now().UTC(), Execution: fx.Internal,
			RouteRuleID: rule, HedgePercent: hedge}
	}
	if r.RequestNonce != "" {
		h := r.fingerprint()
		out.Orders[0].RequestNonce, out.Orders[0].RequestHash = &r.RequestNonce, &h
	}

	// Round trip two: both legs, each linked to the other.
	var b book.Batch
	vars := [2]string{ocoVar0, ocoVar1}
	for i, o := range out.Orders {
		b.Exec(orderInsertSQL, o.AccountID, o.Symbol, o.Side, o.Type, o.Volume, o.Price, o.SL, o.TP, o.TimeInForce, o.ExpiresAt, o.Status, o.RequestNonce, o.RequestHash, o.FillPrice, o.RouteRuleID, o.HedgePercent)
		b.Exec(book.SetVarSQL(vars[i], "LAST_INSERT_ID()"))
		writeLimitPrice(&b, o, vars[i])
	}
	b.Exec("UPDATE `fx_order` SET `ocoOrderId` = " + ocoVar1 + " WHERE `id` = " + ocoVar0)
	b.Exec("UPDATE `fx_order` SET `ocoOrderId` = " + ocoVar0 + " WHERE `id` = " + ocoVar1)
	for i, o := range out.Orders {
		o.OCOOrderID = new(int64) // its value comes from the session (FromSession)
		if err := events.Add(&b, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderAccepted, Payload: events.OrderOf(o), Term: s.term(),
			FromSession: []events.SessionField{{Field: "id", Var: vars[i]}, {Field: "ocoOrderId", Var: vars[1-i]}}}); err != nil {
			return OCOResult{}, err
		}
	}
	var ids [2]int64
	b.Query(book.LastInsertID(&ids[0]), "SELECT "+ocoVar0)
	b.Query(book.LastInsertID(&ids[1]), "SELECT "+ocoVar1)
	if err := tx.Commit(ctx, &b); err != nil {
		if store.IsDuplicateKey(err) && r.RequestNonce != "" {
			tx.Rollback()
			o, ok, lerr := book.LoadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce)
			if lerr != nil || !ok {
				return OCOResult{}, fmt.Errorf("place OCO pair: replay: %v %w", ok, errors.Join(lerr, err))
			}
			return s.replayOCO(ctx, userID, r, o)
		}
		return OCOResult{}, fmt.Errorf("place OCO pair: %w", err)
	}
	for i := range out.Orders {
		out.Orders[i].ID, out.Orders[i].OCOOrderID = ids[i], &ids[1-i]
	}
	return out, nil
}

// The session variables holding the legs' ids in placeOCO's transaction.
const (
	ocoVar0 = "@fx_oco0"
	ocoVar1 = "@fx_oco1"
)

// fingerprint is what the pair's requestNonce binds: both legs, in order.
func (r OCORequest) fingerprint() string {
	sum := sha256.New()
	for _, l := range r.Legs {
		l.AccountID, l.RequestNonce = r.AccountID, ""
		sum.Write([]byte("oco\n" + l.fingerprint() + "\n"))
	}
	return hex.EncodeToString(sum.Sum(nil))
}

// replayOCO answers a retried pair with the pair its nonce placed, or EKEYREUSED when the nonce
// named something else.
func (s *Service) replayOCO(ctx context.Context, userID int64, r OCORequest, first book.Order) (OCOResult, error) {
	if first.OCOOrderID == nil || first.RequestHash == nil || *first.RequestHash != r.fingerprint() {
		return OCOResult{}, fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d for a different request (order %d, %s %s %s %s); nothing was done. "+
			"Send the pair with a new requestNonce; resending the original request unchanged replays it.", r.RequestNonce, r.AccountID, first.ID, first.Side, first.Type, first.Volume, first.Symbol)
	}
	second, err := book.LoadOrder(ctx, s.db, userID, *first.OCOOrderID)
	if err != nil {
		return OCOResult{}, err
	}
	return OCOResult{Orders: [2]book.Order{first, second}, Replayed: true}, nil
}

// cancelPartner adds to a resting fill's batch the cancel of o's other leg when o is an OCO leg
// whose partner still rests (both rows are locked by the batch: Wants). It runs after every
// rule of the fill passed, so a fill refused after it cannot leave the partner marked.
func (w *restingFill) cancelPartner(r *book.Rows, a *book.Account, o *book.Order) error {
	if o.OCOOrderID == nil {
		return nil
	}
	p, ok := r.Orders[*o.OCOOrderID]
	if !ok || p.Status != fx.OrderPending {
		return nil
	}
	r.Writes.Exec("UPDATE `fx_order` SET `status` = 'CANCELLED' WHERE `id` = ? AND `status` = 'PENDING'", p.ID)
	p.Status = fx.OrderCancelled
	w.cancelled = &p.ID
	return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderCancelled, Payload: events.OrderOf(*p), Term: w.s.term()})
}

// cancelOCO is CancelOrder of an OCO leg by its trader: both legs that still rest are cancelled
// in one transaction, their rows locked in id order (as a fill's batch locks them), and
// ECONFLICT when the leg named is no longer PENDING (its partner filled, or it was cancelled).
func (s *Service) cancelOCO(ctx context.Context, userID int64, o book.Order) (book.Order, error) {
	var cancelled []int64
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("cancel OCO order %d: begin: %w", o.ID, err)
		}
		defer tx.Rollback()
		rows, err := store.QueryAll(ctx, tx, "cancel OCO order", book.ScanOrder,
			"SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` IN (?, ?) ORDER BY o.`id` FOR UPDATE", o.ID, *o.OCOOrderID)
		if err != nil {
			return err
		}
		cancelled = cancelled[:0]
		for _, row := range rows {
			if row.ID == o.ID && row.Status != fx.OrderPending {
				return fx.Errorf(fx.ECONFLICT, "Order %d is %s and can no longer be cancelled.", o.ID, row.Status)
			}
		}
		for _, row := range rows {
			if row.Status == fx.OrderPending {
				if err := s.cancelLegTx(ctx, tx, row.ID); err != nil {
					return err
				}
				cancelled = append(cancelled, row.ID)
			}
		}
		return store.Commit(tx)
	})
	if err != nil {
		return book.Order{}, err
	}
	s.notifyCancelled(ctx, cancelled...)
	return book.LoadOrder(ctx, s.db, userID, o.ID)
}

// cancelPartnerTx cancels, in tx, o's other leg when o is an OCO leg whose partner still rests
// (the dealer's cancel of one leg cancels both); it returns the partner's id when it did.
func (s *Service) cancelPartnerTx(ctx context.Context, tx *sql.Tx, o book.Order) (*int64, error) {
	if o.OCOOrderID == nil {
		return nil, nil
	}
	var status string
	err := tx.QueryRowContext(ctx, "SELECT `status` FROM `fx_order` WHERE `id` = ? FOR UPDATE", *o.OCOOrderID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) || status != fx.OrderPending {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cancel OCO partner %d: %w", *o.OCOOrderID, err)
	}
	if err := s.cancelLegTx(ctx, tx, *o.OCOOrderID); err != nil {
		return nil, err
	}
	return o.OCOOrderID, nil
}

// cancelLegTx cancels one locked PENDING leg in tx, with its order.cancelled.
func (s *Service) cancelLegTx(ctx context.Context, tx *sql.Tx, id int64) error {
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_order` SET `status` = 'CANCELLED' WHERE `id` = ? AND `status` = 'PENDING'", id); err != nil {
		return fmt.Errorf("cancel order %d: %w", id, err)
	}
	e, err := s.orderEvent(ctx, tx, events.OrderCancelled, id)
	if err != nil {
		return fmt.Errorf("cancel order %d: %w", id, err)
	}
	return events.Record(ctx, tx, e)
}

// notifyCancelled tells the risk engine the orders ids no longer rest.
func (s *Service) notifyCancelled(ctx context.Context, ids ...int64) {
	changes := make([]risk.Change, 0, len(ids))
	for _, id := range ids {
		changes = append(changes, risk.Change{Kind: risk.OrderCancelled, Order: risk.Order{ID: id}})
	}
	if len(changes) > 0 {
		s.notify(ctx, changes...)
	}
}
