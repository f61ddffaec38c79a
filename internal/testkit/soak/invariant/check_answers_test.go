package invariant

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/fx"
)

func answersFixture() *money {
	s := &Snapshot{
		Taken:     at(100),
		Orders:    []dbOrder{{ID: 100, Account: 1, Nonce: nstr("n1"), Status: "FILLED", Execution: "INTERNAL"}},
		Positions: []dbPosition{{ID: 10, Account: 1, Order: 100, Status: "OPEN"}},
		Deals:     []dbDeal{{ID: 7, Account: 1, Type: "WITHDRAWAL", Amount: dec("-12.50")}},
	}
	ev := &Evidence{
		External: map[string]bool{"t3": true},
		Journal: []Entry{
			answer(1, "t1", "open", http.MethodPost, "/api/fx/orders", 201,
				`{"order":{"id":100,"accountId":1,"requestNonce":"n1","status":"FILLED"},"position":{"id":10,"volume":"1"}}`, at(1), at(1.1)),
			answer(2, "t1", "withdraw", http.MethodPost, "/api/fx/accounts/1/withdraw", 201, `{"deal":{"id":7,"amount":"-12.5"}}`, at(2), at(2.1)),
			answer(3, "t1", "quote", http.MethodGet, "/api/fx/quotes?symbols=EURUSD", 503, errBody(fx.EUNAVAILABLE, fx.MsgPricingUnavailable), at(3), at(3.1)),
			answer(4, "t2", "open", http.MethodPost, "/api/fx/orders", 504, errBody(fx.EUNKNOWN, fx.MsgOutcomeUnknown), at(4), at(4.1)),
			answer(5, "t3", "open", http.MethodPost, "/api/fx/orders", 503, errBody(fx.EUNAVAILABLE, fx.MsgVenueUnavailable), at(5), at(5.1)),
			{Seq: 6, Client: "t1", Op: "open", Method: http.MethodPost, Path: "/api/fx/orders", Start: at(6), End: at(8), Outcome: OutcomeUnknown, Err: "timeout"},
		},
	}
	return &money{s, ev}
}

func TestAnswersInDBCheckFlagsA2xxTheDatabaseDoesNotHoldAsAnswered(t *testing.T) {
	runCases(t, answersFixture, func(m *money) Result { return checkAnswersInDB(m.s, m.ev) }, []checkCase[*money]{
		{"the answered order is not in the database", func(m *money) { m.s.Orders = nil }, "journal 1: order 100 (nonce n1, FILLED) answered 201"},
		{"the order's status differs", func(m *money) { m.s.Orders[0].Status = "REJECTED" }, "journal 1: order 100"},
		{"the order belongs to another account", func(m *money) { m.s.Orders[0].Account = 2 }, "journal 1: order 100"},
		{"the answered position is not in the database", func(m *money) { m.s.Positions = nil }, "journal 1: position 10 of order 100 answered 201, not in the database"},
		{"an open answered without an order", func(m *money) { m.ev.Journal[0].Resp = json.RawMessage(`{"position":{"id":10}}`) },
			"journal 1: open answered 201 without an order"},
		{"the deal's amount differs", func(m *money) { m.s.Deals[0].Amount = dec("-13") },
			"journal 2: withdraw /api/fx/accounts/1/withdraw answered 201 with deal 7 amount -12.5; database has -13"},
		{"an EXTERNAL order answered SENDING has filled since", func(m *money) {
			m.ev.Journal[0].Resp = json.RawMessage(`{"order":{"id":100,"accountId":1,"requestNonce":"n1","status":"SENDING"}}`)
		}, ""},
		{"a resting order answered PENDING has filled since", func(m *money) {
			m.ev.Journal[0].Resp = json.RawMessage(`{"order":{"id":100,"accountId":1,"requestNonce":"n1","status":"PENDING"}}`)
		}, ""},
		{"an order answered FILLED is still PENDING", func(m *money) { m.s.Orders[0].Status = "PENDING" }, "journal 1: order 100 (nonce n1, FILLED)"},
		{"an answer that ended after the snapshot", func(m *money) { m.s.Orders = nil; m.s.Deals = nil; m.s.Taken = at(1.05) }, ""},
	})
}

func TestNo5xxCheckFlagsAnUndocumented5xxAndGroupsAnEpisodeIntoOneRow(t *testing.T) {
	internal := func(seq int64, sec float64) Entry {
		return answer(seq, "t1", "close", http.MethodPost, "/api/fx/positions/"+strconv.FormatInt(seq, 10)+"/close", 500,
			errBody(fx.EINTERNAL, "An internal error occurred."), at(sec), at(sec+0.1))
	}
	no5xx := func(m *money) Result { return checkNo5xx(m.ev) }
	runCases(t, answersFixture, no5xx, []checkCase[*money]{
		{"a 500", func(m *money) { m.ev.Journal = append(m.ev.Journal, internal(7, 10)) },
			`1 answers 500 "An internal error occurred.", 12:00:10.000–12:00:10.100 (no fault), journal 7…7: POST /api/fx/positions/{id}/close ×1`},
		{"a 500 during a fault", func(m *money) {
			m.ev.Journal = append(m.ev.Journal, internal(7, 10))
			m.ev.Windows = []Window{{Kind: "kill", Start: at(9), End: at(11)}}
		}, "(during kill@12:00:09.000)"},
		{"the venue's 503 to a trader not on the EXTERNAL group", func(m *money) { m.ev.Journal[4].Client = "t1" },
			`1 answers 503 "` + fx.MsgVenueUnavailable + `"`},
		{"a 503 whose text is not documented", func(m *money) {
			m.ev.Journal[2].Resp = json.RawMessage(errBody(fx.EUNAVAILABLE, "down for maintenance"))
		}, `1 answers 503 "down for maintenance"`},
		{"a 502 with no JSON body", func(m *money) {
			m.ev.Journal[2].Status, m.ev.Journal[2].Resp = 502, JSONOrString([]byte("Bad Gateway"))
		},
			`1 answers 502 "\"Bad Gateway\""`},
	})
	t.Run("answers alike less than 5 s apart are one row", func(t *testing.T) {
		m := answersFixture()
		m.ev.Journal = append(m.ev.Journal, internal(7, 10), internal(8, 12), internal(9, 30))
		r := no5xx(m)
		if len(r.Violations) != 2 {
			t.Fatalf("%d rows, want 2 (7 and 8 one episode, 9 another): %+v", len(r.Violations), r.Violations)
		}
		expect(t, r, "2 answers 500")
	})
}

func TestTradesAgainCheckFlagsADeskThatFillsNothingWithin30sOfTheLastFault(t *testing.T) {
	lastFault := at(0.5)
	check := func(m *money) Result { return CheckTradesAgain(m.s, m.ev, lastFault) }
	// timedOut makes the fill's answer one the client never had: the desk filled it (its position
	// opened at opened) all the same.
	timedOut := func(m *money, opened float64) {
		e := &m.ev.Journal[0]
		e.Outcome, e.Status, e.Resp, e.Body = OutcomeUnknown, 0, nil, json.RawMessage(`{"requestNonce":"n1"}`)
		m.s.Positions[0].OpenedAt = at(opened)
	}
	runCases(t, answersFixture, check, []checkCase[*money]{
		{"the first fill comes 40 s after the last fault", func(m *money) {
			m.ev.Journal[0].Start, m.ev.Journal[0].End = at(40), at(40.5)
		}, "the desk first filled an order 36.5s after the first open sent after the last fault (12:00:04.000) (journal 1)"},
		{"no fill after the last fault", func(m *money) { m.ev.Journal[0].Status = 503 },
			"no order filled after the last fault ended at 12:00:00.500"},
		// A holder still loading its risk view refuses fills (docs/boot.md): the violation says so.
		{"no fill: the holder refused every open while its risk view loaded", func(m *money) {
			m.ev.Journal[0].Status, m.ev.Journal[0].Resp = 503, json.RawMessage(errBody(fx.EUNAVAILABLE, fx.MsgRiskViewLoading))
		}, `1× 503 "The desk is starting its risk engine`},
		{"the open timed out at the client, and the desk filled it", func(m *money) { timedOut(m, 3) }, ""},
		{"the open timed out at the client, and the desk filled it 40 s after the fault", func(m *money) { timedOut(m, 41) },
			"the desk first filled an order 40s after the first open sent after the last fault (12:00:01.000)"},
		{"the open timed out, and its nonce's order had filled before the fault", func(m *money) { timedOut(m, 0.2) },
			"no order filled after the last fault ended at 12:00:00.500; the opens sent since: 2× outcome unknown"},
	})
	// The load stopped with the last fault; the probe began 6 min later, once the admin lane
	// was done (seed 3171104823755976141 began it 6m46s after): the desk is judged from then.
	t.Run("the first open came minutes after the fault and filled at once", func(t *testing.T) {
		m := answersFixture()
		m.ev.Journal[0].Start, m.ev.Journal[0].End = at(400), at(400.3)
		for i := range m.ev.Journal[1:] {
			m.ev.Journal[1+i].Start = at(0.1) // before the fault ended
		}
		expect(t, check(m), "")
	})
	t.Run("the first open came minutes after the fault and nothing filled for 40 s", func(t *testing.T) {
		m := answersFixture()
		m.ev.Journal[0].Start, m.ev.Journal[0].End = at(440), at(440.3)
		m.ev.Journal[3].Start, m.ev.Journal[3].Status = at(400), 503 // the first asked: refused
		for _, i := range []int{1, 2, 4, 5} {
			m.ev.Journal[i].Start = at(0.1)
		}
		expect(t, check(m), "the desk first filled an order 40.3s after the first open sent after the last fault (12:06:40.000)")
	})
	t.Run("the snapshot unread", func(t *testing.T) {
		m := answersFixture()
		timedOut(m, 3)
		expect(t, CheckTradesAgain(nil, m.ev, lastFault), "no order filled after the last fault")
	})
	t.Run("no fault injected", func(t *testing.T) {
		expect(t, CheckTradesAgain(nil, &Evidence{}, time.Time{}), "")
	})
}
