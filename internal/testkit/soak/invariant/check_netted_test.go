package invariant

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// nettedFixture is a NETTING account's history: order 10 buys 0.2 (opens 100), order 11 sells
// 0.1 (reduces 100), order 12 buys 0.1 (adds to 100, back to 0.2), order 13 sells 0.4 (closes
// 100's 0.2 and opens 101, a SELL of 0.2). group is the account's group's position mode.
func nettedFixture(mode string) *Snapshot {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	pos := func(id, order int64, side, vol, initial, status string) string {
		return fmt.Sprintf(`"id":%d,"accountId":1,"orderId":%d,"symbol":"EURUSD","side":%q,"volume":%q,"initialVolume":%q,"openPrice":"1.1","status":%q`,
			id, order, side, vol, initial, status)
	}
	closed := func(p string, vol string) string {
		return `{` + p + fmt.Sprintf(`,"closedVolume":%q,"price":"1.2","reason":"NETTED"}`, vol)
	}
	order := func(id, position int64) string {
		return fmt.Sprintf(`{"id":%d,"accountId":1,"positionId":%d,"status":"FILLED"}`, id, position)
	}
	evs := []struct{ typ, payload string }{
		{"position.opened", `{` + pos(100, 10, "BUY", "0.2", "0.2", "OPEN") + `}`},
		{"order.filled", order(10, 100)},
		{"position.partly_closed", closed(pos(100, 10, "BUY", "0.1", "0.2", "OPEN"), "0.1")},
		{"order.filled", order(11, 100)},
		{"position.modified", `{` + pos(100, 10, "BUY", "0.2", "0.3", "OPEN") + `}`},
		{"order.filled", order(12, 100)},
		{"position.closed", closed(pos(100, 10, "BUY", "0", "0.3", "CLOSED"), "0.2")},
		{"position.opened", `{` + pos(101, 13, "SELL", "0.2", "0.2", "OPEN") + `}`},
		{"order.filled", order(13, 101)},
	}
	s := &Snapshot{Accounts: []dbAccount{{ID: 1, User: 7, Group: "g"}}, PositionModes: map[string]string{"g": mode}}
	for i, e := range evs {
		s.Events = append(s.Events, dbEvent{ID: int64(i + 1), Account: 1, User: 7, Type: e.typ, Payload: e.payload, CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	for _, o := range []struct {
		id  int64
		vol string
	}{{10, "0.2"}, {11, "0.1"}, {12, "0.1"}, {13, "0.4"}} {
		s.Orders = append(s.Orders, dbOrder{ID: o.id, Account: 1, Type: "MARKET", Status: "FILLED", Symbol: "EURUSD", Volume: dec(o.vol)})
	}
	s.Positions = []dbPosition{
		{ID: 100, Account: 1, Order: 10, Symbol: "EURUSD", Side: "BUY", Volume: dec("0"), OpenVolume: dec("0.3"), OpenPrice: dec("1.1"), Status: "CLOSED", OpenedAt: t0,
			ClosedAt: sql.NullTime{Time: t0.Add(6 * time.Second), Valid: true}, CloseReason: sql.NullString{String: "NETTED", Valid: true}},
		{ID: 101, Account: 1, Order: 13, Symbol: "EURUSD", Side: "SELL", Volume: dec("0.2"), OpenVolume: dec("0.2"), OpenPrice: dec("1.2"), Status: "OPEN", OpenedAt: t0.Add(7 * time.Second)},
	}
	deal := func(id int64, key, vol string) dbDeal {
		return dbDeal{ID: id, Account: 1, Type: "PROFIT", Position: sql.NullInt64{Int64: 100, Valid: true}, Key: key, Volume: decimal.NullDecimal{Decimal: dec(vol), Valid: true},
			Price: decimal.NullDecimal{Decimal: dec("1.2"), Valid: true}}
	}
	s.Deals = []dbDeal{deal(1, "close:100:0.2:0.2", "0.1"), deal(2, "close:100:0.3:0.2", "0.2")}
	return s
}

// The events, answers and positions invariants judge a netted account's fills by what netting
// does — and still find a fill its events do not tell, or a close from the wrong volume; a
// HEDGING account with the same history is judged by the hedging rule and fails it.
func TestNettedFillsJudged(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mode   string
		plant  func(s *Snapshot)
		check  func(*Snapshot) Result
		wantIn string // "" for no violation
	}{
		{"netting: events", "NETTING", func(*Snapshot) {}, checkEvents, ""},
		{"netting: positions", "NETTING", func(*Snapshot) {}, func(s *Snapshot) Result { return checkPositions(s, &Evidence{}) }, ""},
		{"fifo: events", "FIFO", func(*Snapshot) {}, checkEvents, ""},
		{"hedging keeps its rule", "HEDGING", func(*Snapshot) {}, checkEvents, "the order opened position"},
		{"a reduce naming another position", "NETTING", func(s *Snapshot) {
			s.Events[3].Payload = strings.Replace(s.Events[3].Payload, `"positionId":100`, `"positionId":101`, 1)
		}, checkEvents, "its fill reduced position 100"},
		{"a fill its events do not add up to", "NETTING", func(s *Snapshot) { s.Orders[3].Volume = dec("0.5") }, checkEvents, "net 0.4 lots"},
		{"an order event with nothing netted before it", "NETTING", func(s *Snapshot) {
			s.Events[4].Type = "order.modified"
		}, checkEvents, "no NETTED close, add or open"},
		{"a close from the wrong volume", "NETTING", func(s *Snapshot) { s.Deals[1].Key = "close:100:0.3:0.3" },
			func(s *Snapshot) Result { return checkPositions(s, &Evidence{}) }, "closed 0.2 from 0.3, but 0.2 was open"},
	} {
		s := nettedFixture(tc.mode)
		tc.plant(s)
		r := tc.check(s)
		var texts []string
		for _, v := range r.Violations {
			texts = append(texts, v.Text)
		}
		got := strings.Join(texts, "\n")
		switch {
		case tc.wantIn == "" && len(r.Violations) > 0:
			t.Errorf("%s: violations %v, want none", tc.name, r.Violations)
		case tc.wantIn != "" && !strings.Contains(got, tc.wantIn):
			t.Errorf("%s: violations %v, want one saying %q", tc.name, r.Violations, tc.wantIn)
		}
	}
}

// The answers invariant takes a netted fill's answered position when its events name it, and
// only then.
func TestNettedAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		position int64
		bad      bool
	}{{"NETTING", 100, false}, {"NETTING", 101, true}, {"HEDGING", 100, true}} {
		s := nettedFixture(tc.mode)
		s.Taken = time.Now()
		s.Orders[1].Nonce = sql.NullString{String: "n-11", Valid: true}
		ev := &Evidence{Journal: []Entry{{Seq: 1, Op: "open", Method: "POST", Path: "/api/fx/orders", Outcome: Answered, Status: 201, End: s.Taken.Add(-time.Second),
			Resp: []byte(fmt.Sprintf(`{"order":{"id":11,"accountId":1,"requestNonce":"n-11","status":"FILLED"},"position":{"id":%d,"volume":"0.1"}}`, tc.position))}}}
		r := checkAnswersInDB(s, ev)
		if got := len(r.Violations) > 0; got != tc.bad {
			t.Errorf("%s answering position %d: violations %v, want any: %v", tc.mode, tc.position, r.Violations, tc.bad)
		}
	}
}
