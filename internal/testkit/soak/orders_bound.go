package soak

import (
	"context"
)

// The trader lane's price bounds and fill policies (docs/orders.md, «Price bound», «IOC and
// FOK»; docs/soak.md, «The order lane»): MARKET orders with a priceBound — most beyond the quote
// so that they fill, some inside it so that the desk (or the venue, on an EXTERNAL account)
// refuses them — and MARKET orders IOC or FOK. Invariants: invariant.checkBoundHonoured,
// invariant.checkFOKWhole, invariant.checkIOCPart.

// boundedMarket places a small MARKET order with a priceBound and, half the time, IOC or FOK.
// Three in ten bounds sit inside the quote (a buy's below the ask): those must be refused.
func boundedMarket(t *trader, ctx context.Context) {
	s := soakSymbols[t.intN(len(soakSymbols))]
	p := t.deskWeb()
	q, ok := t.quote(ctx, p, s.symbol)
	if !ok {
		return
	}
	side := "BUY"
	if t.intN(2) == 1 {
		side = "SELL"
	}
	slack := 0.0005 + t.float()*0.002 // beyond the quote: fills unless the market jumps
	if t.intN(10) < 3 {
		slack = -(0.0002 + t.float()*0.001) // inside it: refused
	}
	bound := q.Ask * (1 + slack)
	if side == "SELL" {
		bound = q.Bid * (1 - slack)
	}
	body := map[string]any{"accountId": t.account, "symbol": s.symbol, "side": side, "type": "MARKET",
		"volume": "0.05", "priceBound": priceText(bound, s.digits)}
	if tif := fillPolicy(t); tif != "" {
		body["timeInForce"] = tif
	}
	t.place(ctx, body)
}

// policyMarket places a small MARKET order IOC or FOK with no bound.
func policyMarket(t *trader, ctx context.Context) {
	s := soakSymbols[t.intN(len(soakSymbols))]
	side := "BUY"
	if t.intN(2) == 1 {
		side = "SELL"
	}
	tif := "IOC"
	if t.intN(2) == 1 {
		tif = "FOK"
	}
	t.place(ctx, map[string]any{"accountId": t.account, "symbol": s.symbol, "side": side, "type": "MARKET",
		"volume": "0.05", "timeInForce": tif})
}

// fillPolicy is IOC, FOK or none ("") at random.
func fillPolicy(t *trader) string {
	return []string{"", "IOC", "FOK"}[t.intN(3)]
}
