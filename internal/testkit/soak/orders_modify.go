package soak

import (
	"context"
	"fmt"
	"net/http"

	"github.com/shopspring/decimal"
)

// modifyResting is the trader lane's "modify a resting order" (docs/orders.md, «Modify a resting
// order»): it rests a LIMIT or STOP near the market and then moves it in place — its price nearer
// to or further from the market, sometimes its volume or SL as well — so that some modifies race
// the order's own trigger. The modifiedOrders invariant judges the outcome from the events.
func modifyResting(t *trader, ctx context.Context) {
	s := soakSymbols[t.intN(len(soakSymbols))]
	p := t.deskWeb()
	if p == nil {
		return
	}
	q, ok := t.quote(ctx, p, s.symbol)
	if !ok {
		return
	}
	side, typ := "BUY", "LIMIT"
	if t.intN(2) == 1 {
		side = "SELL"
	}
	if t.intN(2) == 1 {
		typ = "STOP"
	}
	// A limit waits for a better price, a stop for a worse one: each starts 0.02 %–0.2 % away.
	price := func(away float64) string {
		ref, sign := q.Ask, -1.0
		if side == "SELL" {
			ref = q.Bid
		}
		if (side == "BUY") != (typ == "LIMIT") {
			sign = 1
		}
		return priceText(ref*(1+sign*away), s.digits)
	}
	nonce := t.nonce("rest")
	body := map[string]any{"accountId": t.account, "symbol": s.symbol, "side": side, "type": typ, "volume": decimal.New(int64(1+t.intN(10)), -2).String(),
		"price": price(0.0002 + t.float()*0.0018), "requestNonce": nonce}
	e := t.callRetrying(ctx, "rest", "/api/fx/orders", nonce, body, t.deskWeb)
	var b struct {
		Order *struct {
			ID int64 `json:"id"`
		} `json:"order"`
	}
	if !e.OK() || !e.Decode(&b) || b.Order == nil {
		return
	}
	change := map[string]any{"price": price(0.00005 + t.float()*0.003)} // nearer or further
	if t.intN(3) == 0 {
		change["volume"] = decimal.New(int64(1+t.intN(10)), -2).String()
	}
	if t.intN(4) == 0 {
		change["sl"] = "" // none, whatever it had
	}
	// A modify sets values: a retry after an unknown outcome is the same request again (it finds
	// the values set and answers 400, changing nothing).
	if p = t.deskWeb(); p == nil {
		return
	}
	t.j.call(ctx, p, t.token, t.name, "modify", http.MethodPatch, fmt.Sprintf("/api/fx/orders/%d", b.Order.ID), change)
}
