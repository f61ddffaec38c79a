package invariant

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/shopspring/decimal"
)

// eventPayload is what checkEvents reads of any event's payload (docs/openapi.json, the events
// page): the union of the fields it compares with the rows.
type eventPayload struct {
	ID             *int64  `json:"id"`
	AccountID      int64   `json:"accountId"`
	OrderID        *int64  `json:"orderId"`
	PositionID     *int64  `json:"positionId"`
	Status         string  `json:"status"`
	Type           string  `json:"type"`
	Amount         string  `json:"amount"`
	BalanceAfter   string  `json:"balanceAfter"`
	IdempotencyKey string  `json:"idempotencyKey"`
	ClosedVolume   string  `json:"closedVolume"`
	Price          *string `json:"price"`
	Reason         string  `json:"reason"`
	CloseReason    *string `json:"closeReason"`
}

// dealEvents is the event each deal type is told by; a deal of another type (a commission, a
// close's profit) is told by its fill's or its close's events.
var dealEvents = map[string]string{"DEPOSIT": "balance.deposit", "WITHDRAWAL": "balance.withdrawal", "SWAP": "swap.charged", "ADJUSTMENT": "balance.adjustment"}

// orderEnds is the event that tells each status an order ends in.
var orderEnds = map[string]string{"CANCELLED": "order.cancelled", "EXPIRED": "order.expired", "REJECTED": "order.rejected"}

// Every committed change has exactly one event with the matching payload, and every event
// its change (docs/architecture.md, «Events»): each deposit, withdrawal, swap and adjustment
// deal one event naming its idempotency key with its amount and balanceAfter; each resting order
// one order.accepted; each FILLED order one order.filled (MARKET) or order.triggered (LIMIT,
// STOP) naming its position; each cancelled, expired or rejected order one event of its end;
// each position one position.opened and, per close deal in order, one position.partly_closed
// or, for the last of a closed position, one position.closed with the close's volume, price
// and reason; one account.stop_out per STOP_OUT close; margin calls and their ends alternating
// to the account's recorded state. Ids are dense and increasing, and each event names its
// account's owner.
func checkEvents(s *Snapshot) Result {
	r := Result{Name: "events"}
	owners := map[int64]int64{}
	for _, a := range s.Accounts {
		owners[a.ID] = a.User
	}
	type key struct {
		typ string
		id  int64
	}
	told := map[key][]int64{}            // (type, order or position id) → event ids
	byDealKey := map[string][]dbEvent{}  // idempotency key → events telling a deal
	closes := map[int64][]eventPayload{} // position → its close events, in id order
	closeTypes := map[int64][]string{}   // … and their types
	stopOuts := map[int64]int{}          // position → account.stop_out events
	calls := map[int64][]string{}        // account → margin call events, in order
	payloads := map[int64]eventPayload{} // event id → payload
	for i, e := range s.Events {
		// Over a pre-filled history the scope holds the soak's accounts' events, between which
		// the desk's jobs write events of the history's accounts.
		if i > 0 && e.ID != s.Events[i-1].ID+1 && !s.Scope.Prefilled() {
			r.Add("", "event ids jump from %d to %d: ids are dense and in commit order", s.Events[i-1].ID, e.ID)
		}
		if owner, ok := owners[e.Account]; !ok || owner != e.User {
			r.Add("", "event %d (%s) names account %d of user %d; the account's owner is %d (found %v)", e.ID, e.Type, e.Account, e.User, owner, ok)
		}
		var p eventPayload
		if err := json.Unmarshal([]byte(e.Payload), &p); err != nil {
			r.Add("", "event %d (%s): payload %s: %v", e.ID, e.Type, Truncate(e.Payload, 120), err)
			continue
		}
		payloads[e.ID] = p
		if p.AccountID != e.Account {
			r.Add("", "event %d (%s) of account %d has a payload of account %d", e.ID, e.Type, e.Account, p.AccountID)
		}
		switch e.Type {
		case "order.accepted", "order.filled", "order.triggered", "order.cancelled", "order.expired", "order.rejected", "position.opened",
			"order.stop_triggered":
			if p.ID == nil {
				r.Add("", "event %d (%s) names no id: %s", e.ID, e.Type, Truncate(e.Payload, 120))
				continue
			}
			told[key{e.Type, *p.ID}] = append(told[key{e.Type, *p.ID}], e.ID)
		case "position.partly_closed", "position.closed":
			if p.ID == nil {
				r.Add("", "event %d (%s) names no position: %s", e.ID, e.Type, Truncate(e.Payload, 120))
				continue
			}
			closes[*p.ID] = append(closes[*p.ID], p)
			closeTypes[*p.ID] = append(closeTypes[*p.ID], e.Type)
		case "position.modified":
		case "order.modified": // judged by checkModifiedOrders (check_orders_modify.go)
		case "account.stop_out":
			if p.PositionID == nil {
				r.Add("", "event %d (account.stop_out) names no position", e.ID)
				continue
			}
			stopOuts[*p.PositionID]++
		case "account.margin_call", "account.margin_call_cleared":
			calls[e.Account] = append(calls[e.Account], e.Type)
		case "balance.deposit", "balance.withdrawal", "swap.charged", "balance.adjustment":
			byDealKey[p.IdempotencyKey] = append(byDealKey[p.IdempotencyKey], e)
		default:
			r.Add("", "event %d has an unknown type %q", e.ID, e.Type)
		}
	}

	// Deals told by their own event, and those events by their deal.
	toldDeals := 0
	for _, d := range s.Deals {
		want, ok := dealEvents[d.Type]
		if !ok {
			continue
		}
		es := byDealKey[d.Key]
		delete(byDealKey, d.Key)
		if len(es) != 1 {
			r.Add("deal:"+d.Key, "%s deal %d (key %s) of account %d told by %d events, want one %s", d.Type, d.ID, d.Key, d.Account, len(es), want)
			continue
		}
		e, p := es[0], payloads[es[0].ID]
		toldDeals++
		if e.Type != want || e.Account != d.Account || p.Type != d.Type || !decEqual(p.Amount, d.Amount) || !decEqual(p.BalanceAfter, d.BalanceAfter) {
			r.Add("deal:"+d.Key, "%s deal %d (key %s, account %d, amount %s, balanceAfter %s) told by event %d %s of account %d: %s",
				d.Type, d.ID, d.Key, d.Account, d.Amount, d.BalanceAfter, e.ID, e.Type, e.Account, Truncate(e.Payload, 200))
		}
	}
	for k, es := range byDealKey {
		for _, e := range es {
			r.Add("deal:"+k, "event %d (%s) names deal %q, which is not in the ledger", e.ID, e.Type, k)
		}
	}

	// Orders: accepted if they rested, then one event of how they ended.
	posByOrder := map[int64]int64{}
	for _, p := range s.Positions {
		posByOrder[p.Order] = p.ID
	}
	orders := map[int64]bool{}
	netted := nettedAccounts(s)
	fills := nettedFills(s, netted)
	stopsTriggered := stopLimitsTriggered(s) // check_orders_trig.go
	for _, o := range s.Orders {
		orders[o.ID] = true
		want := map[string]int{"order.accepted": 0, "order.filled": 0, "order.triggered": 0, "order.cancelled": 0, "order.expired": 0, "order.rejected": 0,
			"order.stop_triggered": stopsTriggered[o.ID]}
		if o.Type == "LIMIT" || o.Type == "STOP" || o.Type == "STOP_LIMIT" {
			want["order.accepted"] = 1
		}
		if o.Status == "FILLED" {
			if o.Type == "MARKET" {
				want["order.filled"] = 1
			} else {
				want["order.triggered"] = 1
			}
		}
		if t, ok := orderEnds[o.Status]; ok {
			want[t] = 1
		}
		for _, t := range slices.Sorted(maps.Keys(want)) {
			if got := told[key{t, o.ID}]; len(got) != want[t] {
				r.Add(fmt.Sprintf("order:%d:%s", o.ID, t), "%s order %d (%s, account %d) told by %d %s events %v, want %d", o.Status, o.ID, o.Type, o.Account, len(got), t, got, want[t])
			}
		}
		if netted[o.Account] {
			checkNettedFill(&r, o, fills, posByOrder, payloads) // check_netted.go
			continue
		}
		for _, t := range []string{"order.filled", "order.triggered"} {
			for _, id := range told[key{t, o.ID}] {
				if p := payloads[id]; p.PositionID == nil || *p.PositionID != posByOrder[o.ID] || p.Status != "FILLED" {
					r.Add("", "event %d (%s) of order %d names position %v, status %s; the order opened position %d", id, t, o.ID, p.PositionID, p.Status, posByOrder[o.ID])
				}
			}
		}
	}

	// Positions: opened once, then one event per close deal.
	closeDeals := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && strings.HasPrefix(d.Key, "close:") {
			closeDeals[d.Position.Int64] = append(closeDeals[d.Position.Int64], d)
		}
	}
	positions := map[int64]bool{}
	for _, p := range s.Positions {
		positions[p.ID] = true
		opened := told[key{"position.opened", p.ID}]
		if len(opened) != 1 {
			r.Add(fmt.Sprintf("position:%d:opened", p.ID), "position %d (account %d) told by %d position.opened events %v, want 1", p.ID, p.Account, len(opened), opened)
		} else if pl := payloads[opened[0]]; pl.OrderID == nil || *pl.OrderID != p.Order {
			r.Add("", "position.opened %d of position %d names order %v, want %d", opened[0], p.ID, pl.OrderID, p.Order)
		}
		ds, cs, ts := closeDeals[p.ID], closes[p.ID], closeTypes[p.ID]
		if len(ds) != len(cs) {
			r.Add(fmt.Sprintf("position:%d:closes", p.ID), "position %d (%s): %d close deals, %d close events %v", p.ID, p.Status, len(ds), len(cs), ts)
		} else {
			for i, d := range ds {
				c, t := cs[i], ts[i]
				wantType := "position.partly_closed"
				if i == len(ds)-1 && p.Status == "CLOSED" {
					wantType = "position.closed"
				}
				if t != wantType || !decEqual(c.ClosedVolume, d.Volume.Decimal) || c.Price == nil || !decEqual(*c.Price, d.Price.Decimal) {
					r.Add(fmt.Sprintf("position:%d:close:%d", p.ID, i), "position %d close %d: deal %d of %s at %s told by %s of %s at %v, want %s",
						p.ID, i+1, d.ID, d.Volume.Decimal, d.Price.Decimal, t, c.ClosedVolume, strOf(c.Price), wantType)
				}
				if t == "position.closed" && (!p.CloseReason.Valid || c.Reason != p.CloseReason.String) {
					r.Add("", "position %d closed for %q, its position.closed says %q", p.ID, p.CloseReason.String, c.Reason)
				}
			}
		}
		stopped := 0
		for _, c := range cs {
			if c.Reason == "STOP_OUT" {
				stopped++
			}
		}
		if stopOuts[p.ID] != stopped {
			r.Add(fmt.Sprintf("position:%d:stop_out", p.ID), "position %d: %d STOP_OUT closes, %d account.stop_out events", p.ID, stopped, stopOuts[p.ID])
		}
	}
	for k, ids := range told {
		if (strings.HasPrefix(k.typ, "order.") && !orders[k.id]) || (k.typ == "position.opened" && !positions[k.id]) {
			r.Add("", "events %v (%s) name %d, which is not in the database", ids, k.typ, k.id)
		}
	}
	for id, cs := range closes {
		if !positions[id] {
			r.Add("", "%d close events name position %d, which is not in the database", len(cs), id)
		}
	}

	// Margin calls: entered, left, entered…, ending where the account is recorded.
	called := 0
	for _, a := range s.Accounts {
		seq := calls[a.ID]
		for i, t := range seq {
			want := "account.margin_call"
			if i%2 == 1 {
				want = "account.margin_call_cleared"
			}
			if t != want {
				r.Add(fmt.Sprintf("account:%d:margin", a.ID), "account %d: margin call events %v do not alternate from account.margin_call", a.ID, seq)
				break
			}
		}
		if in := len(seq)%2 == 1; in != a.MarginCalled {
			r.Add(fmt.Sprintf("account:%d:margin", a.ID), "account %d recorded in margin call %v after events %v", a.ID, a.MarginCalled, seq)
		}
		if a.MarginCalled {
			called++
		}
	}
	r.Figures = fmt.Sprintf("%d events, %d deals told, %d orders, %d positions, %d accounts in margin call", len(s.Events), toldDeals, len(s.Orders), len(s.Positions), called)
	return r
}

// decEqual reports whether text is the decimal d (payloads carry money at the currency's
// minor units, the rows at the column's scale).
func decEqual(text string, d decimal.Decimal) bool {
	v, err := decimal.NewFromString(text)
	return err == nil && v.Equal(d)
}

func strOf(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
