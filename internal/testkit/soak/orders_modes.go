package soak

import (
	"context"
	"fmt"
	"net/http"

	"github.com/shopspring/decimal"
)

// The position modes' actions of the order lane (docs/soak.md, «The order lane»).

// closeBy closes one of the trader's BUY positions against a SELL of the same symbol (a HEDGING
// account's pair; docs/orders.md, «Close-by»), under a request nonce it sends again while the
// outcome is unknown: the retry must replay, never close twice. An account with no pair, or not
// HEDGING, answers 409 — allowed answers.
func (t *trader) closeBy(ctx context.Context) {
	e := t.j.call(ctx, t.anyWeb(), t.token, t.name, "positions", http.MethodGet, fmt.Sprintf("/api/fx/positions?accountId=%d&status=OPEN&limit=500", t.account), nil)
	var b struct {
		Positions []struct {
			ID     int64  `json:"id"`
			Symbol string `json:"symbol"`
			Side   string `json:"side"`
		} `json:"positions"`
	}
	if !e.OK() || !e.Decode(&b) {
		return
	}
	buys := map[string]int64{}
	for _, p := range b.Positions {
		if p.Side == "BUY" {
			buys[p.Symbol] = p.ID
		}
	}
	for _, p := range b.Positions {
		long, ok := buys[p.Symbol]
		if p.Side != "SELL" || !ok {
			continue
		}
		nonce := t.nonce("closeby")
		r := t.callRetrying(ctx, "closeBy", fmt.Sprintf("/api/fx/positions/%d/close-by", long), nonce,
			map[string]any{"oppositeId": p.ID, "requestNonce": nonce}, t.deskWeb)
		t.noteCloseBy(r.OK(), r.Decode, long, p.ID)
		return
	}
}

// noteCloseBy updates the positions the trader knows of from a close-by's answer.
func (t *trader) noteCloseBy(ok bool, decode func(any) bool, ids ...int64) {
	type side struct {
		Volume string `json:"volume"`
		Status string `json:"status"`
	}
	var b struct{ Position, Opposite side }
	if !ok || !decode(&b) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range []side{b.Position, b.Opposite} {
		v, _ := decimal.NewFromString(p.Volume)
		if p.Status == "CLOSED" || v.IsZero() {
			delete(t.positions, ids[i])
		} else {
			t.positions[ids[i]] = v
		}
	}
}
