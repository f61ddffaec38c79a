package invariant

import (
	"encoding/json"
	"testing"
)

// eventRows numbers events from 1, each of account 1 (user 1001) unless its payload names
// another account, with payloads as the desk writes them.
func eventRows(es ...struct {
	typ     string
	payload map[string]any
}) []dbEvent {
	out := make([]dbEvent, len(es))
	for i, e := range es {
		if _, ok := e.payload["accountId"]; !ok {
			e.payload["accountId"] = 1
		}
		b, _ := json.Marshal(e.payload)
		out[i] = dbEvent{ID: int64(i + 1), Account: 1, User: 1001, Type: e.typ, Payload: string(b)}
	}
	return out
}

type ev = struct {
	typ     string
	payload map[string]any
}

// eventsFixture is a day of one account: a deposit, a MARKET fill closed in two parts, a LIMIT
// order triggered and then stopped out with negative balance protection's reset, a swap charge,
// one resting order cancelled, one expired, one rejected, one still pending, and a margin call
// entered and left — each told once.
func eventsFixture() *Snapshot {
	return &Snapshot{
		Accounts: []dbAccount{{ID: 1, User: 1001, Balance: dec("0.00")}},
		Deals: []dbDeal{
			{ID: 1, Account: 1, Type: "DEPOSIT", Amount: dec("1000.00"), BalanceAfter: dec("1000.00"), Key: "deposit:1:n:a"},
			{ID: 2, Account: 1, Type: "PROFIT", Position: nid(10), Key: "close:10:1", Amount: dec("4.00"), BalanceAfter: dec("1004.00"), Volume: ndec("0.4"), Price: ndec("1.1010")},
			{ID: 3, Account: 1, Type: "SWAP", Position: nid(10), Key: "swap:10:2025-03-05", Amount: dec("-4.50"), BalanceAfter: dec("999.50")},
			{ID: 4, Account: 1, Type: "PROFIT", Position: nid(10), Key: "close:10:0.6", Amount: dec("-6.00"), BalanceAfter: dec("993.50"), Volume: ndec("0.6"), Price: ndec("1.099")},
			{ID: 5, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:5", Amount: dec("-1100.00"), BalanceAfter: dec("-106.50"), Volume: ndec("5"), Price: ndec("1.07")},
			{ID: 6, Account: 1, Type: "ADJUSTMENT", Position: nid(11), Key: "nbp:11:5", Amount: dec("106.50"), BalanceAfter: dec("0.00")},
		},
		Orders: []dbOrder{
			{ID: 100, Account: 1, Type: "MARKET", Status: "FILLED"},
			{ID: 101, Account: 1, Type: "LIMIT", Status: "FILLED"},
			{ID: 102, Account: 1, Type: "LIMIT", Status: "CANCELLED"},
			{ID: 103, Account: 1, Type: "STOP", Status: "EXPIRED"},
			{ID: 104, Account: 1, Type: "LIMIT", Status: "REJECTED"},
			{ID: 105, Account: 1, Type: "STOP", Status: "PENDING"},
		},
		Positions: []dbPosition{
			{ID: 10, Account: 1, Order: 100, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("1"), Volume: dec("0"), Status: "CLOSED", CloseReason: nstr("CLIENT")},
			{ID: 11, Account: 1, Order: 101, Symbol: "EURUSD", Side: "BUY", OpenVolume: dec("5"), Volume: dec("0"), Status: "CLOSED", CloseReason: nstr("STOP_OUT")},
		},
		Events: eventRows(
			ev{"balance.deposit", map[string]any{"type": "DEPOSIT", "amount": "1000.00", "balanceAfter": "1000.00", "idempotencyKey": "deposit:1:n:a"}},
			ev{"order.filled", map[string]any{"id": 100, "status": "FILLED", "positionId": 10}},
			ev{"position.opened", map[string]any{"id": 10, "orderId": 100}},
			ev{"position.partly_closed", map[string]any{"id": 10, "closedVolume": "0.4", "price": "1.101", "reason": "CLIENT"}},
			ev{"swap.charged", map[string]any{"type": "SWAP", "amount": "-4.50", "balanceAfter": "999.50", "idempotencyKey": "swap:10:2025-03-05", "rolloverDate": "2025-03-05"}},
			ev{"position.closed", map[string]any{"id": 10, "closedVolume": "0.6", "price": "1.099", "reason": "CLIENT", "closeReason": "CLIENT"}},
			ev{"order.accepted", map[string]any{"id": 101, "status": "PENDING"}},
			ev{"order.triggered", map[string]any{"id": 101, "status": "FILLED", "positionId": 11}},
			ev{"position.opened", map[string]any{"id": 11, "orderId": 101}},
			ev{"account.margin_call", map[string]any{"marginLevel": "80.00"}},
			ev{"position.closed", map[string]any{"id": 11, "closedVolume": "5", "price": "1.07", "reason": "STOP_OUT", "closeReason": "STOP_OUT"}},
			ev{"account.stop_out", map[string]any{"positionId": 11, "closedVolume": "5"}},
			ev{"balance.adjustment", map[string]any{"type": "ADJUSTMENT", "amount": "106.50", "balanceAfter": "0.00", "idempotencyKey": "nbp:11:5"}},
			ev{"account.margin_call_cleared", map[string]any{"marginLevel": nil}},
			ev{"order.accepted", map[string]any{"id": 102, "status": "PENDING"}},
			ev{"order.cancelled", map[string]any{"id": 102, "status": "CANCELLED"}},
			ev{"order.accepted", map[string]any{"id": 103, "status": "PENDING"}},
			ev{"order.expired", map[string]any{"id": 103, "status": "EXPIRED"}},
			ev{"order.accepted", map[string]any{"id": 104, "status": "PENDING"}},
			ev{"order.rejected", map[string]any{"id": 104, "status": "REJECTED", "reason": "Not enough free margin"}},
			ev{"order.accepted", map[string]any{"id": 105, "status": "PENDING"}},
		),
	}
}

// without drops the events at the given indexes and renumbers the rest, as a writer that never
// wrote them would have left the log: dense all the same.
func without(s *Snapshot, idx ...int) {
	drop := map[int]bool{}
	for _, i := range idx {
		drop[i] = true
	}
	var kept []dbEvent
	for i, e := range s.Events {
		if !drop[i] {
			e.ID = int64(len(kept) + 1)
			kept = append(kept, e)
		}
	}
	s.Events = kept
}

// with appends e to the log under the next id.
func with(s *Snapshot, typ string, payload map[string]any) {
	e := eventRows(ev{typ, payload})[0]
	e.ID = int64(len(s.Events) + 1)
	s.Events = append(s.Events, e)
}

func TestEventsCheckFlagsAChangeNotToldOnceOrAnEventWithoutItsChange(t *testing.T) {
	runCases(t, eventsFixture, checkEvents, []checkCase[*Snapshot]{
		{"a swap charge told by no event", func(s *Snapshot) { without(s, 4) },
			"SWAP deal 3 (key swap:10:2025-03-05) of account 1 told by 0 events, want one swap.charged"},
		{"a deposit told twice", func(s *Snapshot) {
			with(s, "balance.deposit", map[string]any{"type": "DEPOSIT", "amount": "1000.00", "balanceAfter": "1000.00", "idempotencyKey": "deposit:1:n:a"})
		}, "DEPOSIT deal 1 (key deposit:1:n:a) of account 1 told by 2 events"},
		{"a withdrawal told that the ledger does not hold", func(s *Snapshot) {
			with(s, "balance.withdrawal", map[string]any{"type": "WITHDRAWAL", "amount": "-10.00", "balanceAfter": "-10.00", "idempotencyKey": "withdraw:1:n:b"})
		}, `names deal "withdraw:1:n:b", which is not in the ledger`},
		{"an adjustment told with another amount", func(s *Snapshot) { s.Deals[5].Amount = dec("106.51") },
			"ADJUSTMENT deal 6 (key nbp:11:5, account 1, amount 106.51, balanceAfter 0) told by event 13"},
		{"a deal told by the wrong type", func(s *Snapshot) { s.Events[0].Type = "balance.withdrawal" },
			"DEPOSIT deal 1 (key deposit:1:n:a, account 1, amount 1000, balanceAfter 1000) told by event 1 balance.withdrawal"},
		{"a gap in the ids", func(s *Snapshot) { s.Events[5].ID, s.Events[6].ID = 100, 101 }, "event ids jump from 5 to 100"},
		{"an event naming another user", func(s *Snapshot) { s.Events[2].User = 2002 }, "event 3 (position.opened) names account 1 of user 2002"},
		{"an unknown type", func(s *Snapshot) { with(s, "order.lost", map[string]any{"id": 100}) }, `unknown type "order.lost"`},
		{"a fill not told", func(s *Snapshot) { without(s, 1) }, "FILLED order 100 (MARKET, account 1) told by 0 order.filled events"},
		{"a trigger told as a market fill", func(s *Snapshot) { s.Events[7].Type = "order.filled" },
			"FILLED order 101 (LIMIT, account 1) told by 0 order.triggered events"},
		{"a fill naming another position", func(s *Snapshot) {
			s.Events[1].Payload = `{"id":100,"accountId":1,"status":"FILLED","positionId":11}`
		}, "event 2 (order.filled) of order 100 names position"},
		{"a resting order never accepted", func(s *Snapshot) { without(s, 20) }, "PENDING order 105 (STOP, account 1) told by 0 order.accepted events"},
		{"a cancel told twice", func(s *Snapshot) { with(s, "order.cancelled", map[string]any{"id": 102, "status": "CANCELLED"}) },
			"CANCELLED order 102 (LIMIT, account 1) told by 2 order.cancelled events"},
		{"an expiry not told", func(s *Snapshot) { without(s, 17) }, "EXPIRED order 103 (STOP, account 1) told by 0 order.expired events"},
		{"a rejection not told", func(s *Snapshot) { without(s, 19) }, "REJECTED order 104 (LIMIT, account 1) told by 0 order.rejected events"},
		{"an order event without its order", func(s *Snapshot) { with(s, "order.cancelled", map[string]any{"id": 999}) }, "name 999, which is not in the database"},
		{"a position opened twice", func(s *Snapshot) { with(s, "position.opened", map[string]any{"id": 10, "orderId": 100}) },
			"position 10 (account 1) told by 2 position.opened events"},
		{"a close not told", func(s *Snapshot) { without(s, 5) }, "position 10 (CLOSED): 2 close deals, 1 close events"},
		{"a partial close told with another volume", func(s *Snapshot) {
			s.Events[3].Payload = `{"id":10,"accountId":1,"closedVolume":"0.5","price":"1.101","reason":"CLIENT"}`
		}, "position 10 close 1: deal 2 of 0.4 at 1.101 told by position.partly_closed of 0.5"},
		{"a full close told as partial", func(s *Snapshot) { s.Events[5].Type = "position.partly_closed" },
			"position 10 close 2: deal 4 of 0.6 at 1.099 told by position.partly_closed"},
		{"a close told with another reason", func(s *Snapshot) { s.Positions[0].CloseReason = nstr("SL") }, `position 10 closed for "SL", its position.closed says "CLIENT"`},
		{"a stop-out not told as such", func(s *Snapshot) { without(s, 11) }, "position 11: 1 STOP_OUT closes, 0 account.stop_out events"},
		{"a margin call recorded without its event", func(s *Snapshot) { without(s, 9, 13); s.Accounts[0].MarginCalled = true },
			"account 1 recorded in margin call true after events []"},
		{"a margin call's end without its start", func(s *Snapshot) { without(s, 9) }, "do not alternate from account.margin_call"},
		{"a margin call left open", func(s *Snapshot) { without(s, 13) }, "account 1 recorded in margin call false after events [account.margin_call]"},
	})
}
