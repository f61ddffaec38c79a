package invariant

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"fxdesk/internal/fx"
)

// refused is the fixture of the refused-request check: a support token's deposit and a read-only
// trader's order refused 403; the expiring token used before and after its expiry (at 10 s); the
// revoked token used before its revocation (at 20 s, writing an audit row), within its bound and
// after it (refused on web1); a refusal never answered and one met by the database away; a MySQL
// cut from 30 s to 33 s. The read-only account holds one order, one position and a deposit.
type refused struct {
	s  *Snapshot
	ev *Evidence
}

func refusedFixture() *refused {
	withID := func(e Entry, id string) Entry { e.RequestID = id; return e }
	on := func(e Entry, proc string) Entry { e.Proc = proc; return e }
	forbidden := func(msg string) string { return errBody(fx.EFORBIDDEN, msg) }
	unauth := errBody(fx.EUNAUTH, "The bearer token is not valid.")
	s := &Snapshot{
		Taken:     at(100),
		Orders:    []dbOrder{{ID: 100, Account: 5, Status: "FILLED"}, {ID: 101, Account: 1, Status: "FILLED"}},
		Positions: []dbPosition{{ID: 10, Account: 5, Order: 100, Status: "OPEN"}},
		Deals: []dbDeal{
			{ID: 1, Account: 5, Type: "DEPOSIT"},
			{ID: 2, Account: 5, Type: "SWAP", Position: nid(10)},
			{ID: 3, Account: 1, Type: "DEPOSIT"},
		},
		Audits: []dbAudit{{ID: 7, Via: "api", Action: "account_group.update", EntityType: "account_group", EntityID: "soak-b", RequestID: nstr("soak-refused-5")}},
	}
	ev := &Evidence{
		Refusals: &Refusals{Expires: at(10), Revoked: at(20), ReadOnlyAccount: 5, Before: AccountActivity{Orders: 1, Positions: 1, Deals: 1}},
		Windows:  []Window{{Kind: FaultCut, Start: at(30), End: at(33), Note: "mysql"}},
		Journal: []Entry{
			withID(answer(1, "refused-support", OpRefused+"money permission", http.MethodPost, "/api/admin/fx/accounts/5/deposit", 403,
				forbidden("This needs the money permission, which the support role does not hold."), at(1), at(1.1)), "soak-refused-1"),
			withID(answer(2, "refused-readonly", OpRefused+"trade scope", http.MethodPost, "/api/fx/orders", 403,
				forbidden(`This route needs a token with the trade scope; this one has "read".`), at(2), at(2.1)), "soak-refused-2"),
			withID(answer(3, "expiring", OpExpiredToken, http.MethodPut, "/api/admin/fx/account-groups/soak-a/overrides/symbols/EURUSD", 200, `{}`, at(5), at(5.1)), "soak-refused-3"),
			withID(answer(4, "expiring", OpExpiredToken, http.MethodPut, "/api/admin/fx/account-groups/soak-a/overrides/symbols/EURUSD", 401, unauth, at(12), at(12.1)), "soak-refused-4"),
			withID(answer(5, "revoked", OpRevokedToken, http.MethodPatch, "/api/admin/fx/account-groups/soak-b", 200, `{}`, at(15), at(15.1)), "soak-refused-5"),
			withID(answer(6, "revoked", OpRevokedToken, http.MethodPatch, "/api/admin/fx/account-groups/soak-b", 401, unauth, at(22), at(22.1)), "soak-refused-6"),
			withID(answer(7, "revoked", OpRevokedToken, http.MethodPatch, "/api/admin/fx/account-groups/soak-b", 401, unauth, at(26), at(26.1)), "soak-refused-7"),
			withID(Entry{Seq: 8, Client: "refused-viewer", Op: OpRefused + "dealing permission", Proc: "web2", Method: http.MethodPost, Path: "/api/admin/fx/positions/10/close",
				Start: at(27), End: at(29), Outcome: OutcomeUnknown, Err: "timeout"}, "soak-refused-8"),
			withID(answer(10, "refused-finance", OpRefused+FourEyes, http.MethodPost, "/api/admin/fx/money-requests/3/approve", 403,
				forbidden("Money request 3 was asked for by user 14: another finance user must approve it (four eyes); nothing was done."), at(3), at(3.1)), "soak-refused-10"),
			withID(on(answer(9, "refused-finance", OpRefused+"limits permission", http.MethodPatch, "/api/admin/fx/account-groups/soak-b", 503,
				errBody(fx.EUNAVAILABLE, fx.MsgDatabaseUnavailable), at(31), at(31.2)), "web2"), "soak-refused-9"),
		},
	}
	return &refused{s, ev}
}

func TestRefusedChangedNothingFlagsARefusalNotAnsweredAsOneOrOneThatChangedSomething(t *testing.T) {
	revokedAt := func(sec float64, status int, resp, proc string) Entry {
		e := answer(20, "revoked", OpRevokedToken, http.MethodPatch, "/api/admin/fx/account-groups/soak-b", status, resp, at(sec), at(sec+0.1))
		e.RequestID, e.Proc = "soak-refused-20", proc
		return e
	}
	runCases(t, refusedFixture, func(f *refused) Result { return checkRefusedChangedNothing(f.s, f.ev) }, []checkCase[*refused]{
		{"a refusal answered 2xx", func(f *refused) {
			f.ev.Journal[0].Status, f.ev.Journal[0].Resp = 200, json.RawMessage(`{"deal":{"id":9}}`)
		},
			"journal 1: refused-support's POST /api/admin/fx/accounts/5/deposit on web1 lacks the money permission, answered 200"},
		{"a refusal answered 500", func(f *refused) {
			f.ev.Journal[1].Status, f.ev.Journal[1].Resp = 500, json.RawMessage(errBody(fx.EINTERNAL, "An internal error occurred."))
		}, `answered 500 "An internal error occurred.", not 403 naming the trade scope`},
		{"a 403 that names another permission", func(f *refused) {
			f.ev.Journal[0].Resp = json.RawMessage(errBody(fx.EFORBIDDEN, "This needs the read permission, which the support role does not hold."))
		}, "not 403 naming the money permission"},
		{"a refused request with an audit row", func(f *refused) {
			f.s.Audits = append(f.s.Audits, dbAudit{ID: 8, Via: "api", Action: "account.deposit", EntityType: "account", EntityID: "5", RequestID: nstr("soak-refused-1")})
		}, "(request soak-refused-1) lacks the money permission, yet audit 8 (account.deposit account 5) carries its request id"},
		{"an unanswered refusal with an audit row", func(f *refused) {
			f.s.Audits = append(f.s.Audits, dbAudit{ID: 8, Via: "api", Action: "position.close", EntityType: "position", EntityID: "10", RequestID: nstr("soak-refused-8")})
		}, "yet audit 8 (position.close position 10)"},
		{"a finance user's own approval answered 2xx", func(f *refused) {
			f.ev.Journal[8].Status, f.ev.Journal[8].Resp = 200, json.RawMessage(`{"deal":{"id":9}}`)
		}, "journal 10: refused-finance's POST /api/admin/fx/money-requests/3/approve on web1 lacks the four eyes, answered 200"},
		{"a finance user's own approval met a holder away", func(f *refused) {
			f.ev.Journal[8].Status, f.ev.Journal[8].Resp = 503, json.RawMessage(errBody(fx.EUNAVAILABLE, fx.MsgPricingUnavailable))
		}, ""},
		{"a permission refusal answered as if the holder were away", func(f *refused) {
			f.ev.Journal[0].Status, f.ev.Journal[0].Resp = 503, json.RawMessage(errBody(fx.EUNAVAILABLE, fx.MsgPricingUnavailable))
		}, "lacks the money permission, answered 503"},
		{"a finance user's own approval with an approval row", func(f *refused) {
			f.s.Audits = append(f.s.Audits, dbAudit{ID: 8, Via: "api", Action: "money_request.approve", EntityType: "money_request", EntityID: "3", RequestID: nstr("soak-refused-10")})
		}, "(request soak-refused-10) lacks the four eyes, yet audit 8 (money_request.approve money_request 3)"},
		{"a refusal sent without a request id", func(f *refused) { f.ev.Journal[1].RequestID = "" },
			"journal 2: refused-readonly's POST /api/fx/orders was sent with no request id"},
		{"the expired token answered 2xx past its expiry", func(f *refused) { f.ev.Journal[3].Status, f.ev.Journal[3].Resp = 200, json.RawMessage(`{}`) },
			"journal 4: expiring's PUT /api/admin/fx/account-groups/soak-a/overrides/symbols/EURUSD on web1 sent 2s after its token expired at 12:00:10.000, answered 200"},
		{"the expired token's write past its expiry left an audit row", func(f *refused) {
			f.s.Audits = append(f.s.Audits, dbAudit{ID: 8, Via: "api", Action: "symbol_override.put", RequestID: nstr("soak-refused-4")})
		}, "(request soak-refused-4) sent 2s after its token expired at 12:00:10.000, yet audit 8"},
		{"the expired token answered 2xx within the clock's skew", func(f *refused) { f.ev.Journal[3].Start, f.ev.Journal[3].Status = at(10.5), 200 }, ""},
		{"the revoked token answered 2xx past its bound", func(f *refused) { f.ev.Journal = append(f.ev.Journal, revokedAt(40, 200, `{}`, "web2")) },
			"journal 20: revoked's PATCH /api/admin/fx/account-groups/soak-b on web2 sent 20s after its token was revoked at 12:00:20.000, answered 200"},
		{"the revoked token answered 500 past its bound", func(f *refused) {
			f.ev.Journal = append(f.ev.Journal, revokedAt(40, 500, errBody(fx.EINTERNAL, "An internal error occurred."), "web2"))
		}, "answered 500 \"An internal error occurred.\", not 401"},
		{"the revoked token answered 2xx within its bound", func(f *refused) { f.ev.Journal[5].Status = 200 }, ""},
		{"the revoked token answered 2xx past its bound in a MySQL cut, by a process that never refused it", func(f *refused) {
			f.ev.Journal = append(f.ev.Journal, revokedAt(31, 200, `{}`, "web2"))
		}, ""},
		{"the revoked token answered 2xx past its bound in a MySQL cut, by a process that had refused it", func(f *refused) {
			f.ev.Journal = append(f.ev.Journal, revokedAt(31, 200, `{}`, "web1"))
		}, "journal 20: revoked's PATCH /api/admin/fx/account-groups/soak-b on web1 sent 11s after"},
		{"the revoked token answered 2xx past its bound in a Redis cut", func(f *refused) {
			f.ev.Windows[0].Note = "redis"
			f.ev.Journal = append(f.ev.Journal, revokedAt(31, 200, `{}`, "web2"))
		}, "on web2 sent 11s after its token was revoked"},
		{"the revoked token answered 2xx past its bound in a flood of the process answering", func(f *refused) {
			f.ev.Windows = []Window{{Kind: FaultFlood, Start: at(39), End: at(42), Note: "web2"}}
			f.ev.Journal = append(f.ev.Journal, revokedAt(40, 200, `{}`, "web2"))
		}, "on web2 sent 20s after"},
		{"the revoked token answered 2xx past its bound in a flood of another process", func(f *refused) {
			f.ev.Windows = []Window{{Kind: FaultFlood, Start: at(39), End: at(42), Note: "web3"}}
			f.ev.Journal = append(f.ev.Journal, revokedAt(40, 200, `{}`, "web2"))
		}, "on web2 sent 20s after"},
		{"the token not revoked yet", func(f *refused) {
			f.ev.Refusals.Revoked = time.Time{}
			f.ev.Journal[6].Status, f.ev.Journal[6].Resp = 200, json.RawMessage(`{}`)
		}, ""},
		{"a 2xx that an earlier revocation puts past the bound", func(f *refused) { f.ev.Refusals.Revoked = at(5) },
			"journal 5: revoked's PATCH /api/admin/fx/account-groups/soak-b on web1 sent 10s after its token was revoked at 12:00:05.000, answered 200"},
		{"an order on the read-only account", func(f *refused) { f.s.Orders = append(f.s.Orders, dbOrder{ID: 102, Account: 5, Status: "FILLED"}) },
			"the read-only trader's account 5 holds 2 orders, 1 positions, 1 deals but swaps, but held 1 orders"},
		{"a close deal on the read-only account", func(f *refused) {
			f.s.Deals = append(f.s.Deals, dbDeal{ID: 4, Account: 5, Type: "PROFIT", Position: nid(10), Key: "close:10:0.01"})
		}, "holds 1 orders, 1 positions, 2 deals but swaps"},
		{"a swap charged on the read-only account, and another account's order", func(f *refused) {
			f.s.Deals = append(f.s.Deals, dbDeal{ID: 4, Account: 5, Type: "SWAP", Position: nid(10)})
			f.s.Orders = append(f.s.Orders, dbOrder{ID: 102, Account: 1, Status: "FILLED"})
		}, ""},
	})
}

func TestRefusedChangedNothingHoldsWhenTheLaneDidNotRun(t *testing.T) {
	f := refusedFixture()
	f.ev.Refusals = nil
	f.ev.Journal[0].Status = 200
	expect(t, checkRefusedChangedNothing(f.s, f.ev), "")
}

// A later check knows more faults around a request, and says so in the row's text; its key must
// stay, or the report would list the same refusal twice.
func TestRefusedChangedNothingKeysEachRowByItsRequest(t *testing.T) {
	f := refusedFixture()
	f.ev.Journal[0].Status, f.ev.Journal[0].Resp = 201, json.RawMessage(`{"deal":{"id":9}}`)
	f.s.Audits = append(f.s.Audits, dbAudit{ID: 8, Via: "api", Action: "account.deposit", EntityType: "account", EntityID: "5", RequestID: nstr("soak-refused-1")})
	first := checkRefusedChangedNothing(f.s, f.ev)
	f.ev.Windows = append(f.ev.Windows, Window{Kind: FaultFlood, Start: at(0.5), End: at(1.5), Note: "web1"})
	later := checkRefusedChangedNothing(f.s, f.ev)
	if len(first.Violations) != 2 || len(later.Violations) != 2 {
		t.Fatalf("violations %v then %v; want the answer's and the audit row's", first.Violations, later.Violations)
	}
	for i := range first.Violations {
		if first.Violations[i].Key != later.Violations[i].Key {
			t.Fatalf("row %d keyed %q, then %q", i, first.Violations[i].Key, later.Violations[i].Key)
		}
	}
	if first.Violations[1].Text == later.Violations[1].Text {
		t.Fatalf("the answer's row did not name the flood around it: %q", later.Violations[1].Text)
	}
}
