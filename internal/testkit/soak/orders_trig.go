package soak

import (
	"context"
	"net/http"
	"strconv"

	"github.com/shopspring/decimal"
)

// The trader lane's STOP_LIMIT and OCO orders (docs/orders.md «Stop-limit», «OCO pairs»),
// judged by invariant.checkStopLimitWithinLimit and checkOCOAtMostOneFilled. Their stops sit
// 0.05 … 0.5 % from the market, so the soak's random walk and gaps trigger some of them.

// stopLimitBody is a STOP_LIMIT on s a fraction d beyond the quote, its limit a fraction e back
// towards the market (MT5's side of the stop); nil without a quote.
func (t *trader) stopLimitBody(ctx context.Context, s struct {
	symbol string
	digits int32
}, side string) map[string]any {
	q, ok := t.quote(ctx, t.deskWeb(), s.symbol)
	if !ok {
		return nil
	}
	d, e := 0.0005+t.float()*0.0045, t.float()*0.002
	stop, limit := q.Ask*(1+d), q.Ask*(1+d)*(1-e)
	if side == "SELL" {
		stop, limit = q.Bid*(1-d), q.Bid*(1-d)*(1+e)
	}
	return map[string]any{"symbol": s.symbol, "side": side, "type": "STOP_LIMIT", "volume": decimal.New(int64(1+t.intN(20)), -2).String(),
		"price": priceText(stop, s.digits), "limitPrice": priceText(limit, s.digits)}
}

// placeStopLimit places one STOP_LIMIT.
func (t *trader) placeStopLimit(ctx context.Context) {
	side := "BUY"
	if t.intN(2) == 1 {
		side = "SELL"
	}
	body := t.stopLimitBody(ctx, soakSymbols[t.intN(len(soakSymbols))], side)
	if body == nil {
		return
	}
	body["accountId"] = t.account
	t.place(ctx, body)
}

// placeOCO places a breakout pair on one symbol — a buy above the market, a sell below, each a
// STOP or a STOP_LIMIT — and now and then cancels one leg (which cancels both).
func (t *trader) placeOCO(ctx context.Context) {
	s := soakSymbols[t.intN(len(soakSymbols))]
	legs := make([]map[string]any, 0, 2)
	for _, side := range []string{"BUY", "SELL"} {
		leg := t.stopLimitBody(ctx, s, side)
		if leg == nil {
			return
		}
		if t.intN(2) == 0 {
			leg["type"] = "STOP"
			delete(leg, "limitPrice")
		}
		legs = append(legs, leg)
	}
	nonce := t.nonce("oco")
	e := t.callRetrying(ctx, "oco", "/api/fx/orders/oco", nonce, map[string]any{"accountId": t.account, "requestNonce": nonce, "legs": legs}, t.deskWeb)
	var b struct {
		Orders []struct {
			ID int64 `json:"id"`
		} `json:"orders"`
	}
	if e.OK() && e.Decode(&b) && len(b.Orders) == 2 && t.intN(4) == 0 {
		t.j.call(ctx, t.deskWeb(), t.token, t.name, "oco-cancel", http.MethodDelete, "/api/fx/orders/"+strconv.FormatInt(b.Orders[t.intN(2)].ID, 10), nil)
	}
}
