package trading

import (
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
)

// STOP_LIMIT orders (docs/orders.md «Stop-limit»). Placed with price (the stop) and limitPrice,
// they rest as a STOP until the market reaches the stop; the risk engine then hands them to
// Fill like any stop, and the fill's transaction writes triggeredAt and order.stop_triggered.
// From then on the order rests as a LIMIT at limitPrice: it fills in that same transaction when
// the desk's price is already at or better than the limit, and otherwise waits — a gap past the
// limit never fills at the gapped price.
//
// The limit follows MT5's Buy/Sell Stop Limit: a buy's limit is at or below its stop (buy the
// pull-back after a break upwards), a sell's at or above. Unlike a LIMIT order, whose price is
// judged on the feed's quote, the limit is the worst price the trader gets, markup included:
// the engine keys the triggered order at the feed price where the desk's price reaches the
// limit (restingKey), and the fill checks the desk's price again (stopLimitFillable).

// checkRestingPrice refuses a resting order whose price is on the wrong side of the market:
// limits wait for a better price, stops (and a STOP_LIMIT's stop) for a worse one, both measured
// on the price the order would fill at (the ask for a buy, the bid for a sell).
func checkRestingPrice(in catalog.Instrument, r OrderRequest, q book.Quote) error {
	digits := int32(in.Digits)
	price := *r.Price
	ref, word := q.Ask, "ask"
	if r.Side == fx.Sell {
		ref, word = q.Bid, "bid"
	}
	what := strings.ToLower(string(r.Type))
	if r.Type == fx.StopLimit {
		what = "stop-limit's stop"
	}
	wantBelow := (r.Side == fx.Buy) == (r.Type == fx.Limit)
	if wantBelow && !price.LessThan(ref) {
		return fx.Errorf(fx.EINVALID, "A %s %s at %s must be below the %s (%s).", sideWord(r.Side), what, price.StringFixed(digits), word, ref.StringFixed(digits))
	}
	if !wantBelow && !price.GreaterThan(ref) {
		return fx.Errorf(fx.EINVALID, "A %s %s at %s must be above the %s (%s).", sideWord(r.Side), what, price.StringFixed(digits), word, ref.StringFixed(digits))
	}
	return nil
}

// checkLimitShape checks limitPrice against the order's type: required on a STOP_LIMIT, on the
// MT5 side of its stop, refused on every other type.
func checkLimitShape(in catalog.Instrument, r *OrderRequest) error {
	if r.Type != fx.StopLimit {
		if r.LimitPrice != nil {
			return fx.Errorf(fx.EINVALID, "limitPrice applies to STOP_LIMIT orders only.")
		}
		return nil
	}
	if r.Price == nil || r.LimitPrice == nil {
		return fx.Errorf(fx.EINVALID, "A STOP_LIMIT order needs price (its stop) and limitPrice (the limit it rests at once the stop is reached).")
	}
	if err := checkPrice("limitPrice", in, *r.LimitPrice); err != nil {
		return err
	}
	stop, limit := *r.Price, *r.LimitPrice
	digits := int32(in.Digits)
	if r.Side == fx.Buy && limit.GreaterThan(stop) {
		return fx.Errorf(fx.EINVALID, "A buy stop-limit's limitPrice (%s) must be at or below its stop (%s): it buys the pull-back once the ask reaches the stop (MT5's Buy Stop Limit).",
			limit.StringFixed(digits), stop.StringFixed(digits))
	}
	if r.Side == fx.Sell && limit.LessThan(stop) {
		return fx.Errorf(fx.EINVALID, "A sell stop-limit's limitPrice (%s) must be at or above its stop (%s): it sells the pull-back once the bid reaches the stop (MT5's Sell Stop Limit).",
			limit.StringFixed(digits), stop.StringFixed(digits))
	}
	return nil
}

// stopLimitFillable reports whether a STOP_LIMIT resting at limit fills at price, the desk's
// price for its side (markup included): a buy at or below its limit, a sell at or above.
func stopLimitFillable(side fx.Side, limit, price decimal.Decimal) bool {
	if side == fx.Buy {
		return !price.GreaterThan(limit)
	}
	return !price.LessThan(limit)
}

// restingKey is the price the risk engine keys resting order o at: its price, and for a
// triggered STOP_LIMIT the feed price at which the desk's price (feed ± markup, terms of the
// account's group) reaches its limit, so the engine hands it over only when it can fill.
func restingKey(o book.Order, t catalog.Terms, known bool) risk.Order {
	ro := riskOrder(o)
	if o.Type != fx.StopLimit || o.TriggeredAt == nil || !known {
		return ro
	}
	markup := t.Instrument.Group.MarkupPoints.Mul(t.Instrument.Point)
	if o.Side == fx.Buy {
		ro.Price = o.LimitPrice.Sub(markup).InexactFloat64()
	} else {
		ro.Price = o.LimitPrice.Add(markup).InexactFloat64()
	}
	return ro
}

// riskStopLimit is riskOrder's case of a STOP_LIMIT: a STOP at its stop until triggered, a
// LIMIT at its limit after (restingKey moves that by the markup when the terms are known).
func riskStopLimit(o book.Order, ro risk.Order) risk.Order {
	if o.TriggeredAt == nil {
		ro.Type = risk.Stop
		return ro
	}
	ro.Type, ro.Price = risk.Limit, floatOf(o.LimitPrice)
	return ro
}

// stopLimitTrigger is the part of a resting fill a STOP_LIMIT adds (restingFill.Apply): the
// first time its stop is handed over it writes triggeredAt and order.stop_triggered; then it
// fills only when price, the desk's price now, is at or better than its limit. rest is true when
// it does not fill now: the order rests as a LIMIT (just triggered), or is refused for the market
// (triggered earlier, and the price moved past the limit again before the batch priced it; the
// engine keeps it under watch).
func (w *restingFill) stopLimitTrigger(r *book.Rows, a *book.Account, o *book.Order, t catalog.Terms, price decimal.Decimal) (rest bool, err error) {
	if o.TriggeredAt == nil {
		now := r.Now.UTC().Truncate(time.Millisecond)
		r.Writes.Exec("UPDATE `fx_order` SET `triggeredAt` = ? WHERE `id` = ? AND `triggeredAt` IS NULL", now, o.ID)
		o.TriggeredAt = &now
		if err := events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderStopTriggered, Payload: events.OrderOf(*o), Term: w.s.term()}); err != nil {
			return false, err
		}
		w.triggered = true
	}
	if stopLimitFillable(o.Side, *o.LimitPrice, price) {
		return false, nil
	}
	if w.triggered {
		w.resting = restingKey(*o, t, true)
		return true, nil
	}
	return true, fmt.Errorf("fill order %d: the desk's price %s is past its limit %s: %w", o.ID, price, o.LimitPrice, risk.ErrMarketUnavailable)
}

// writeLimitPrice adds to a placement's batch the limit of a STOP_LIMIT order o, whose id is in
// session variable idVar (nothing for other types).
func writeLimitPrice(b *book.Batch, o book.Order, idVar string) {
	if o.LimitPrice != nil {
		b.Exec("UPDATE `fx_order` SET `limitPrice` = ? WHERE `id` = "+idVar, o.LimitPrice)
	}
}

// limitFingerprint is what a STOP_LIMIT's limit adds to the request a requestNonce binds
// (fingerprint): nothing on other orders, so their stored fingerprints stay valid.
func limitFingerprint(r OrderRequest) string {
	if r.LimitPrice == nil {
		return ""
	}
	return "\nlimit " + r.LimitPrice.String()
}
