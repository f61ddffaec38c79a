package soak

import "context"

// orderActions are the trader lane's uses of the order types and position modes of
// docs/orders.md; orderAction runs one of them, picked at random.
var orderActions = []func(t *trader, ctx context.Context){
	modifyResting,
	(*trader).placeStopLimit, (*trader).placeOCO,
	boundedMarket, policyMarket, // orders_bound.go
	(*trader).trailAction,
	(*trader).closeBy,
}

// orderAction runs one of orderActions (none: nothing).
func (t *trader) orderAction(ctx context.Context) {
	if len(orderActions) == 0 {
		return
	}
	orderActions[t.intN(len(orderActions))](t, ctx)
}
