package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/tick"
)

// OrderChange is a modify in place of a resting order (PATCH /api/fx/orders/{id}, docs/orders.md
// «Modify a resting order»). A field left nil (or "" for TimeInForce) keeps the order's value;
// SL and TP may also be removed (StopChange). Side, symbol and type never change: that is a
// new order.
type OrderChange struct {
	Price      *decimal.Decimal // a LIMIT's or STOP's price; a STOP_LIMIT's stop
	LimitPrice *decimal.Decimal // a STOP_LIMIT's limit
	Volume     *decimal.Decimal
	SL, TP     StopChange
	// TimeInForce GTC, GTD or DAY; ExpiresAt with GTD (alone it moves a GTD order's expiry).
	TimeInForce fx.TimeInForce
	ExpiresAt   *time.Time
}

// empty reports whether c asks for nothing at all.
func (c OrderChange) empty() bool {
	return c.Price == nil && c.LimitPrice == nil && c.Volume == nil && !c.SL.Set && !c.TP.Set && c.TimeInForce == "" && c.ExpiresAt == nil
}

// ModifyOrder changes userID's PENDING order id in place: the same id, its modifiedAt set and one
// order.modified event in the change's transaction, after the checks a placement of the order as
// changed would pass (price against the market, SL/TP, volume, expiry, the account group's
// terms, the margin). A modify sets values, so it is naturally idempotent: sent twice, the second
// finds nothing to change (EINVALID) and changes nothing.
//
// Errors: ENOTFOUND (not the caller's order), EINVALID (nothing to change, a bad value),
// ECONFLICT (the order is no longer PENDING — decided under the order's row lock, so of a modify
// racing the risk engine's fill exactly one wins — a STOP_LIMIT whose stop triggered asked for a
// new stop, the account's state, the margin), EUNAVAILABLE (no price, not the holder).
func (s *Service) ModifyOrder(ctx context.Context, userID, id int64, c OrderChange) (book.Order, error) {
	return s.modifyOrder(ctx, userID, id, c)
}

// ModifyOrder is Service.ModifyOrder on any trader's order by the dealer (docs/orders.md), with
// the action in the audit log by ctx's actor in the modify's own transaction. The account's state
// does not refuse it (the dealer acts whatever the state); every other check does. Errors are
// Service.ModifyOrder's, plus audit.ErrNoActor when ctx names nobody (nothing is written then).
func (d *Dealer) ModifyOrder(ctx context.Context, id int64, c OrderChange) (book.Order, error) {
	if _, ok := audit.ActorFrom(ctx); !ok {
		return book.Order{}, audit.ErrNoActor
	}
	o, err := d.s.modifyOrder(ctx, 0, id, c)
	if err == nil {
		d.s.log.InfoContext(ctx, "dealer modified an order", slog.Int64("order_id", id), slog.Int64("account_id", o.AccountID))
	}
	return o, err
}

// modifyOrder is ModifyOrder for userID (0: the dealer).
func (s *Service) modifyOrder(ctx context.Context, userID, id int64, c OrderChange) (book.Order, error) {
	if c.empty() {
		return book.Order{}, fx.Errorf(fx.EINVALID, "Nothing to change: send any of price, limitPrice, volume, sl, tp, timeInForce, expiresAt.")
	}
	// Read unlocked to answer bad input before anything is locked; everything is judged again on
	// the locked row, which decides.
	o, err := loadOrderOf(ctx, s.db, userID, id)
	if err != nil {
		return book.Order{}, err
	}
	if err := checkModifiable(o); err != nil {
		return book.Order{}, err
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return book.Order{}, err
	}
	in, ok := cat.Instruments[o.Symbol]
	if !ok {
		return book.Order{}, fmt.Errorf("order %d: instrument %s is missing", id, o.Symbol)
	}
	if in.Status == fx.InstrumentHalted {
		return book.Order{}, fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", in.Symbol)
	}
	m := book.NewMarket(s.prices, cat)
	q, err := m.Tradable(o.Symbol)
	if err != nil {
		return book.Order{}, err
	}
	if _, err := s.changed(in, o, c, q); err != nil {
		return book.Order{}, err
	}
	var next book.Order
	err = s.retry(ctx, func() (err error) {
		next, err = s.modifyLocked(ctx, userID, o.AccountID, id, c, in, cat, m, q)
		return err
	})
	if err != nil {
		return book.Order{}, err
	}
	s.notify(ctx, risk.Change{Kind: risk.OrderModified, Order: s.modifiedKey(ctx, cat, next)})
	return next, nil
}

// modifiedKey is how the engine watches the modified order: a triggered STOP_LIMIT rests at the
// feed price where the desk's price, markup included, reaches its limit (restingKey), which
// needs the account's group; every other order at its own price.
func (s *Service) modifiedKey(ctx context.Context, cat *catalog.Catalog, o book.Order) risk.Order {
	if o.Type != fx.StopLimit || o.TriggeredAt == nil {
		return riskOrder(o)
	}
	a, err := book.LoadAccount(ctx, s.db, 0, o.AccountID)
	if err != nil {
		// Keyed at the limit itself: the fill re-checks its price, so at worst it waits longer.
		s.log.WarnContext(ctx, "modified stop-limit keyed at its limit: account unread", slog.Int64("order_id", o.ID), slog.Any("error", err))
		return riskOrder(o)
	}
	t, known := termsOf(cat, a.Group, o.Symbol)
	return restingKey(o, t, known)
}

// modifyLocked is the modify's one fenced transaction: round trip one locks the account (as
// every placement and fill of it does, so locks are taken in the same order) and the order, and
// reads the account's open exposures; the change is judged again on those rows, and round trip
// two writes the order, its order.modified and, for the dealer, the audit row.
func (s *Service) modifyLocked(ctx context.Context, userID, accountID, id int64, c OrderChange, in catalog.Instrument, cat *catalog.Catalog, m *book.Market, q book.Quote) (book.Order, error) {
	tx, locks, err := s.begin(ctx, gate.Fill, "modify order")
	if err != nil {
		return book.Order{}, err
	}
	defer tx.Rollback()
	var a book.Account
	var o book.Order
	var found, exists bool
	var exps []book.Exposure
	locks.Query(book.RowInto(&a, &found, book.ScanAccount), book.LockAccountSQL, accountID)
	locks.Query(book.RowInto(&o, &exists, book.ScanOrder), "SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` = ? FOR UPDATE", id)
	locks.Query(book.ExposuresInto(&exps), book.ExposuresSQL, accountID)
	if err := tx.Lock(ctx, locks, "modify order"); err != nil {
		return book.Order{}, err
	}
	if err := book.OwnedBy(a, found, userID, accountID); err != nil || !exists || o.AccountID != a.ID {
		return book.Order{}, fx.Errorf(fx.ENOTFOUND, "Order %d not found.", id)
	}
	// The race with the risk engine's fill (and a cancel, an expiry) is decided here: whichever
	// locked the row first wins, and a fill that committed first leaves it FILLED.
	if err := checkModifiable(o); err != nil {
		return book.Order{}, err
	}
	if userID != 0 {
		if err := stateRefusal(a, actOpen); err != nil {
			return book.Order{}, err
		}
	}
	next, err := s.changed(in, o, c, q)
	if err != nil {
		return book.Order{}, err
	}
	t, _ := termsOf(cat, a.Group, in.Symbol)
	if err := checkRestingFits(m, cat, t, a, exps, next.Side, next.Volume, q); err != nil {
		return book.Order{}, err
	}
	// The app's clock, to the millisecond the column keeps, so the row and its event agree.
	at := s.now().UTC().Truncate(time.Millisecond)
	next.ModifiedAt = &at
	var b book.Batch
	b.Exec("UPDATE `fx_order` SET `price` = ?, `limitPrice` = ?, `volume` = ?, `sl` = ?, `tp` = ?, `timeInForce` = ?, `expiresAt` = ?, `modifiedAt` = ? "+
		"WHERE `id` = ? AND `status` = 'PENDING'", next.Price, next.LimitPrice, next.Volume, next.SL, next.TP, next.TimeInForce, next.ExpiresAt, next.ModifiedAt, id)
	if err := events.Add(&b, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderModified, Payload: events.OrderOf(next), Term: s.term()}); err != nil {
		return book.Order{}, err
	}
	if userID == 0 {
		stmt, args, err := audit.Row(ctx, audit.Change{Action: "order.modify", EntityType: "order", EntityID: itoa(id), Before: orderAudit(o), After: orderAudit(next)})
		if err != nil {
			return book.Order{}, fmt.Errorf("dealer modify of order %d: %w", id, err)
		}
		b.Exec(stmt, args...)
	}
	if err := tx.Commit(ctx, &b); err != nil {
		return book.Order{}, fmt.Errorf("modify order %d: %w", id, err)
	}
	return next, nil
}

// loadOrderOf reads order id of userID (0: of anyone, for the dealer); ENOTFOUND otherwise.
func loadOrderOf(ctx context.Context, q book.Querier, userID, id int64) (book.Order, error) {
	if userID != 0 {
		return book.LoadOrder(ctx, q, userID, id)
	}
	o, err := book.ScanOrder(q.QueryRowContext(ctx, "SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return book.Order{}, fx.Errorf(fx.ENOTFOUND, "Order %d not found.", id)
	}
	if err != nil {
		return book.Order{}, fmt.Errorf("load order %d: %w", id, err)
	}
	return o, nil
}

// checkModifiable refuses a modify of an order that no longer rests.
func checkModifiable(o book.Order) error {
	if o.Status != fx.OrderPending {
		return fx.Errorf(fx.ECONFLICT, "Order %d is %s and can no longer be modified.", o.ID, o.Status)
	}
	return nil
}

// changed is o with c applied, after every check that needs no row lock: the values (digits,
// volume step, expiry: checkOrderShape, as at placement), the price against the quote q and
// SL/TP against the order's price (checkRestingPrice). A change that leaves every value as it is
// is EINVALID: nothing would be written, and a client that believes it changed something is told.
func (s *Service) changed(in catalog.Instrument, o book.Order, c OrderChange, q book.Quote) (book.Order, error) {
	next := o
	triggered := o.Type == fx.StopLimit && o.TriggeredAt != nil
	if c.Price != nil {
		if triggered {
			return book.Order{}, fx.Errorf(fx.ECONFLICT, "Order %d's stop already triggered; it rests as a limit: modify limitPrice.", o.ID)
		}
		next.Price = c.Price
	}
	if c.LimitPrice != nil {
		if o.Type != fx.StopLimit {
			return book.Order{}, fx.Errorf(fx.EINVALID, "limitPrice applies to STOP_LIMIT orders only; order %d is a %s.", o.ID, o.Type)
		}
		if err := checkPrice("limitPrice", in, *c.LimitPrice); err != nil {
			return book.Order{}, err
		}
		next.LimitPrice = c.LimitPrice
	}
	if o.Type == fx.StopLimit && !triggered && (c.Price != nil || c.LimitPrice != nil) {
		// Its limit stays on the MT5 side of its stop, as at placement.
		if err := checkLimitShape(in, &OrderRequest{Side: o.Side, Type: o.Type, Price: next.Price, LimitPrice: next.LimitPrice}); err != nil {
			return book.Order{}, err
		}
	}
	if c.Volume != nil {
		if err := checkVolumeStep(in, *c.Volume); err != nil {
			return book.Order{}, err
		}
		next.Volume = *c.Volume
	}
	if c.SL.Set {
		next.SL = c.SL.Value
	}
	if c.TP.Set {
		next.TP = c.TP.Value
	}
	// Expiry, as placement judges it: a new timeInForce (DAY: the next rollover from now), or a
	// GTD order's new expiresAt; left alone, the order keeps the expiry it has.
	if c.TimeInForce != "" || c.ExpiresAt != nil {
		shape := OrderRequest{Type: o.Type, Price: next.Price, TimeInForce: c.TimeInForce, ExpiresAt: c.ExpiresAt}
		if shape.TimeInForce == "" {
			shape.TimeInForce = o.TimeInForce
		}
		expires, err := s.checkOrderShape(in, &shape)
		if err != nil {
			return book.Order{}, err
		}
		next.TimeInForce, next.ExpiresAt = shape.TimeInForce, expires
	} else if next.Price != nil {
		if err := checkPrice("price", in, *next.Price); err != nil {
			return book.Order{}, err
		}
	}
	if sameOrder(o, next) {
		return book.Order{}, fx.Errorf(fx.EINVALID, "Nothing to change: order %d already has these values.", o.ID)
	}
	// Judged as the order now rests: a STOP_LIMIT whose stop triggered as a LIMIT at its limit,
	// one still waiting for its stop as a STOP (its limit is the stop-limit rules', at
	// placement), every other order as what it is.
	typ, price := o.Type, next.Price
	switch {
	case triggered:
		typ, price = fx.Limit, next.LimitPrice
	case o.Type == fx.StopLimit:
		typ = fx.Stop
	}
	if price == nil {
		return book.Order{}, fmt.Errorf("order %d: a resting %s without a price", o.ID, o.Type)
	}
	ref := *price
	if o.Type == fx.StopLimit && next.LimitPrice != nil {
		ref = *next.LimitPrice // its position opens at the limit
	}
	if err := checkRestingLevels(in, o.Side, typ, *price, q, nil, nil); err != nil {
		return book.Order{}, err
	}
	if err := checkStops(in, o.Side, ref, next.SL, next.TP); err != nil {
		return book.Order{}, err
	}
	return next, nil
}

// sameOrder reports whether a modify would leave every value a modify can change as it was.
func sameOrder(a, b book.Order) bool {
	return sameDecimal(a.Price, b.Price) && sameDecimal(a.LimitPrice, b.LimitPrice) && a.Volume.Equal(b.Volume) &&
		sameDecimal(a.SL, b.SL) && sameDecimal(a.TP, b.TP) && a.TimeInForce == b.TimeInForce && sameTime(a.ExpiresAt, b.ExpiresAt)
}

func sameDecimal(a, b *decimal.Decimal) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// stillTriggers is the guard a resting fill passes on its locked order o (restingFill): o, as
// stored now, still triggers at the quote at that fired it. The engine decided on the order as
// it held it; a modify that locked the row first may have moved the price since, and filling the
// modified order at a market that never reached its new price would fill it where the trader no
// longer asked (docs/orders.md, «Modify a resting order»). Such a fill is dropped with nothing
// written (risk.ErrOrderModified) and the engine watches the order at its new price. A fill
// asked without the quote that fired it (a zero quote: tools and tests) is not re-judged.
func stillTriggers(o book.Order, at tick.Quote) error {
	if at.Bid == 0 && at.Ask == 0 {
		return nil
	}
	typ, price := o.Type, o.Price
	switch {
	case o.Type == fx.StopLimit && o.TriggeredAt != nil:
		typ, price = fx.Limit, o.LimitPrice
	case o.Type == fx.StopLimit:
		typ = fx.Stop
	}
	if price == nil {
		return nil
	}
	// In floats, as the engine compared (risk.Order.Price is the stored price as a float): the
	// order it fired is judged here exactly as it was judged there.
	p, ref := price.InexactFloat64(), at.Ask
	if o.Side == fx.Sell {
		ref = at.Bid
	}
	// As the engine's triggers (docs/architecture.md, «The risk engine»): a buy limit when ask ≤
	// price, a buy stop when ask ≥ price, a sell limit when bid ≥ price, a sell stop when bid ≤ price.
	below := (o.Side == fx.Buy) == (typ == fx.Limit)
	if (below && ref > p) || (!below && ref < p) {
		return fmt.Errorf("fill order %d: at %s it no longer triggers at %v: %w", o.ID, price, ref, risk.ErrOrderModified)
	}
	return nil
}
