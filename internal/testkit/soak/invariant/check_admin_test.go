package invariant

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// admin is the fixture of the audit trail check: a deposit retried under its nonce (the first
// attempt's outcome unknown, the second a replay), a group edit, a refused move, a dealer's
// close, and the command line's token creation.
type admin struct {
	s  *Snapshot
	ev *Evidence
}

func adminFixture() *admin {
	withID := func(e Entry, id string) Entry { e.RequestID = id; return e }
	unknown := func(e Entry) Entry { e.Outcome, e.Status, e.Resp = OutcomeUnknown, 0, nil; return e }
	s := &Snapshot{
		Taken: at(100),
		Deals: []dbDeal{
			{ID: 1, Account: 1, Type: "DEPOSIT", Key: "deposit:1:t1-dep-1"},
			{ID: 2, Account: 1, Type: "PROFIT", Position: nid(10), Key: "close:10:1", Comment: dealerCloseComment},
		},
		Positions: []dbPosition{{ID: 10, Account: 1, Status: "CLOSED", CloseReason: nstr("DEALER")}},
		Audits: []dbAudit{
			{ID: 1, Via: "cli", Action: "token.create", EntityType: "token", EntityID: "1"},
			{ID: 2, Via: "api", Action: "account.deposit", EntityType: "account", EntityID: "1", RequestID: nstr("soak-dep-t1-dep-1")},
			{ID: 3, Via: "api", Action: "account_group.update", EntityType: "account_group", EntityID: "soak-a", RequestID: nstr("soak-admin-1")},
			{ID: 4, Via: "api", Action: "position.close", EntityType: "position", EntityID: "10", RequestID: nstr("soak-admin-3")},
		},
	}
	ev := &Evidence{Journal: []Entry{
		withID(unknown(answer(1, "t1", "deposit", http.MethodPost, "/api/admin/fx/accounts/1/deposit", 0, "", at(1), at(3))), "soak-dep-t1-dep-1"),
		withID(answer(2, "t1", "deposit-retry", http.MethodPost, "/api/admin/fx/accounts/1/deposit", 200, `{"deal":{"id":1}}`, at(3.3), at(3.4)), "soak-dep-t1-dep-1"),
		withID(answer(3, "admin", "groupEdit", http.MethodPatch, "/api/admin/fx/account-groups/soak-a", 200, `{}`, at(4), at(4.1)), "soak-admin-1"),
		withID(answer(4, "admin", "move", http.MethodPost, "/api/admin/fx/accounts/1/group", 409, errBody(fx.ECONFLICT, "sending"), at(5), at(5.1)), "soak-admin-2"),
		withID(answer(5, "admin", "dealerClose", http.MethodPost, "/api/admin/fx/positions/10/close", 200, `{}`, at(6), at(6.1)), "soak-admin-3"),
		answer(6, "admin", "desk", http.MethodGet, "/api/admin/fx/desk", 200, `{}`, at(7), at(7.1)),
	}}
	return &admin{s, ev}
}

func TestAuditTrailCheckFlagsAnAdminChangeWithoutItsRowOrARowWithoutItsRequest(t *testing.T) {
	runCases(t, adminFixture, func(a *admin) Result { return checkAuditTrail(a.s, a.ev) }, []checkCase[*admin]{
		{"a 2xx admin write with no audit row", func(a *admin) { a.s.Audits = append(a.s.Audits[:2], a.s.Audits[3]) },
			"journal 3: PATCH /api/admin/fx/account-groups/soak-a (request soak-admin-1) answered 2xx, 0 audit rows"},
		{"a 2xx admin write recorded twice", func(a *admin) {
			a.s.Audits = append(a.s.Audits, dbAudit{ID: 5, Via: "api", Action: "account_group.update", EntityType: "account_group", EntityID: "soak-a", RequestID: nstr("soak-admin-1")})
		}, "answered 2xx, 2 audit rows carry its request id"},
		{"a refused write with an audit row", func(a *admin) {
			a.s.Audits = append(a.s.Audits, dbAudit{ID: 5, Via: "api", Action: "account.move", EntityType: "account", EntityID: "1", RequestID: nstr("soak-admin-2")})
		}, "answered 409, nothing done, yet audit 5 (account.move)"},
		{"a row on another entity than the route's", func(a *admin) { a.s.Audits[2].EntityID = "soak-b" },
			"recorded as audit 3 on account_group soak-b, not account_group soak-a"},
		{"an API row no journaled request sent", func(a *admin) {
			a.s.Audits = append(a.s.Audits, dbAudit{ID: 5, Via: "api", Action: "account.deposit", EntityType: "account", EntityID: "1", RequestID: nstr("elsewhere")})
		}, "audit 5 (account.deposit account 1) carries request id elsewhere, which no request of the journal sent"},
		{"an API row with no request id", func(a *admin) { a.s.Audits[1].RequestID = sql.NullString{} },
			"audit 2 (account.deposit account 1): written through the API with no request id"},
		{"a row of a request still in flight", func(a *admin) {
			a.s.Audits = append(a.s.Audits, dbAudit{ID: 5, Via: "api", Action: "account.state", EntityType: "account", EntityID: "1", RequestID: nstr("soak-admin-4")})
			a.ev.InFlight = map[string]bool{"soak-admin-4": true}
		}, ""},
		{"a write answered after the snapshot with no row yet", func(a *admin) {
			a.ev.Journal[2].End = at(101)
			a.s.Audits = append(a.s.Audits[:2], a.s.Audits[3])
		}, ""},
		{"a write whose outcome is unknown and not done", func(a *admin) {
			a.ev.Journal[3].Status, a.ev.Journal[3].Resp = http.StatusGatewayTimeout, json.RawMessage(errBody(fx.EUNKNOWN, fx.MsgOutcomeUnknown))
		}, ""},
		{"a dealer close with no position.close row", func(a *admin) { a.s.Audits[3].Action = "order.cancel" },
			"position 10 closed with closeReason DEALER has no position.close audit row"},
		{"a dealer's partial close with no row", func(a *admin) {
			a.s.Deals = append(a.s.Deals, dbDeal{ID: 3, Account: 1, Type: "PROFIT", Position: nid(11), Key: "close:11:1", Comment: dealerCloseComment})
		}, "position 11: 1 dealer close deals, 0 position.close audit rows"},
		{"a position.close row with no dealer close", func(a *admin) { a.s.Deals[1].Comment = "close client"; a.s.Positions[0].CloseReason = nstr("CLIENT") },
			"position 10: 1 position.close audit rows and no dealer close deal"},
		{"a deposit above the four-eyes threshold, asked and approved", func(a *admin) { fourEyes(a, "money_request", "3") }, ""},
		{"a four-eyes ask recorded on the account", func(a *admin) { fourEyes(a, "account", "1") },
			"(request soak-dep-t1-dep-2) recorded as audit 5 on account 1, not money_request 3"},
	})
}

// fourEyes adds a deposit above the four-eyes threshold, answered 202 with money request 3 and
// approved by another finance user, whose ask's audit row names entity typ id.
func fourEyes(a *admin, typ, id string) {
	ask := answer(7, "t1", "deposit", http.MethodPost, "/api/admin/fx/accounts/1/deposit", 202,
		`{"moneyRequest":{"id":3,"accountId":1,"kind":"DEPOSIT","state":"PENDING"},"replayed":false}`, at(8), at(8.1))
	ask.RequestID = "soak-dep-t1-dep-2"
	approve := answer(8, "t1", "approve", http.MethodPost, "/api/admin/fx/money-requests/3/approve", 200,
		`{"moneyRequest":{"id":3,"state":"APPROVED"},"deal":{"id":9},"replayed":false}`, at(9), at(9.1))
	approve.RequestID = "soak-approve-3"
	a.ev.Journal = append(a.ev.Journal, ask, approve)
	a.s.Audits = append(a.s.Audits,
		dbAudit{ID: 5, Via: "api", Action: "money_request.create", EntityType: typ, EntityID: id, RequestID: nstr("soak-dep-t1-dep-2")},
		dbAudit{ID: 6, Via: "api", Action: "money_request.approve", EntityType: "money_request", EntityID: "3", RequestID: nstr("soak-approve-3")})
}

// nbp is the fixture of the negative balance check: a protected account a gap's stop-out took
// below zero and the desk reset, an unprotected one it left below zero, and a protected hedge
// (account 3) whose losing leg's close left it below zero with the winning leg open — no reset —
// and whose winning leg then brought it back above zero.
func nbpFixture() *Snapshot {
	vol := func(s string) decimal.NullDecimal { return decimal.NullDecimal{Decimal: dec(s), Valid: true} }
	ev := func(id, account int64, typ string, position int64) dbEvent {
		return dbEvent{ID: id, Account: account, Type: typ, Payload: fmt.Sprintf(`{"id":%d,"accountId":%d}`, position, account)}
	}
	return &Snapshot{
		Groups: map[string]bool{"soak-thin": true, "soak-raw": false},
		Accounts: []dbAccount{
			{ID: 1, Group: "soak-thin", Balance: dec("0.00")},
			{ID: 2, Group: "soak-raw", Balance: dec("-412.50")},
			{ID: 3, Group: "soak-thin", Balance: dec("150.00")},
		},
		Deals: []dbDeal{
			{ID: 1, Account: 1, Type: "DEPOSIT", Amount: dec("300.00"), BalanceAfter: dec("300.00"), Key: "deposit:1:a"},
			{ID: 2, Account: 1, Type: "PROFIT", Amount: dec("-712.50"), BalanceAfter: dec("-412.50"), Position: nid(10), Volume: vol("0.1"), Key: "close:10:0.1"},
			{ID: 3, Account: 1, Type: "ADJUSTMENT", Amount: dec("412.50"), BalanceAfter: dec("0.00"), Position: nid(10), Key: "nbp:10:0.1"},
			{ID: 4, Account: 2, Type: "DEPOSIT", Amount: dec("300.00"), BalanceAfter: dec("300.00"), Key: "deposit:2:a"},
			{ID: 5, Account: 2, Type: "PROFIT", Amount: dec("-712.50"), BalanceAfter: dec("-412.50"), Position: nid(11), Volume: vol("0.1"), Key: "close:11:0.1"},
			{ID: 6, Account: 3, Type: "DEPOSIT", Amount: dec("300.00"), BalanceAfter: dec("300.00"), Key: "deposit:3:a"},
			{ID: 7, Account: 3, Type: "PROFIT", Amount: dec("-500.00"), BalanceAfter: dec("-200.00"), Position: nid(20), Volume: vol("0.2"), Key: "close:20:0.2"},
			{ID: 8, Account: 3, Type: "PROFIT", Amount: dec("350.00"), BalanceAfter: dec("150.00"), Position: nid(21), Volume: vol("0.1"), Key: "close:21:0.1"},
		},
		Positions: []dbPosition{
			{ID: 10, Account: 1, Status: "CLOSED"},
			{ID: 11, Account: 2, Status: "CLOSED"},
			{ID: 20, Account: 3, Status: "CLOSED"},
			{ID: 21, Account: 3, Status: "CLOSED"},
		},
		Events: []dbEvent{
			ev(1, 1, "position.opened", 10), ev(2, 2, "position.opened", 11), ev(3, 3, "position.opened", 20), ev(4, 3, "position.opened", 21),
			ev(5, 1, "position.closed", 10), ev(6, 2, "position.closed", 11), ev(7, 3, "position.closed", 20), ev(8, 3, "position.closed", 21),
		},
	}
}

// resetPerClose gives the hedge of account 3 the per-close rule's reset: 200.00 after its losing
// leg, with the winning leg still open; the account ends at 350.00 instead of 150.00.
func resetPerClose(s *Snapshot) {
	adj := dbDeal{ID: 9, Account: 3, Type: "ADJUSTMENT", Amount: dec("200.00"), BalanceAfter: dec("0.00"), Position: nid(20), Key: "nbp:20:0.2"}
	s.Deals = slices.Insert(s.Deals, 7, adj)
	s.Deals[8].BalanceAfter = dec("350.00")
	s.Accounts[2].Balance = dec("350.00")
}

func TestNegativeBalanceCheckFlagsAProtectedAccountLeftBelowZero(t *testing.T) {
	runCases(t, nbpFixture, checkNegativeBalance, []checkCase[*Snapshot]{
		{"no reset after the close", func(s *Snapshot) {
			s.Deals = append(s.Deals[:2], s.Deals[3:]...)
			s.Accounts[0].Balance = dec("-412.50")
		},
			"account 1 (group soak-thin, protected): close deal 2 (position 10, key close:10:0.1) left the balance at -412.5 with nothing open and no ADJUSTMENT follows it"},
		{"a reset short of zero", func(s *Snapshot) { s.Deals[2].Amount, s.Deals[2].BalanceAfter = dec("400.00"), dec("-12.50") },
			"ADJUSTMENT deal 3 (key nbp:10:0.1) posted 400, balance after -12.5"},
		{"a reset keyed after another close", func(s *Snapshot) { s.Deals[2].Key = "nbp:10:0.2" },
			"ADJUSTMENT deal 3 (key nbp:10:0.2)"},
		{"a reset in an unprotected group", func(s *Snapshot) { s.Groups["soak-thin"] = false },
			"close deal 2 left -412.5, yet ADJUSTMENT deal 3 reset it"},
		{"an adjustment no close called for", func(s *Snapshot) { s.Deals[1].Amount, s.Deals[1].BalanceAfter = dec("-12.50"), dec("287.50") },
			"ADJUSTMENT deal 3 of 412.5 follows no close that left it below zero"},
		{"a protected account below zero with nothing open", func(s *Snapshot) { s.Accounts[1].Group = "soak-thin" },
			"account 2 (group soak-thin, protected) ends at -412.5 with no open position"},
		{"a reset while the hedge's winning leg was open", resetPerClose,
			"account 3 (group soak-thin, protected): close deal 7 (key close:20:0.2) left -200 with 1 positions open, yet ADJUSTMENT deal 9 reset it"},
		{"a trader better off than without protection", resetPerClose,
			"account 3 (group soak-thin, protected): protection paid it 200, but without it the account was never deeper below zero with nothing open than 0"},
		{"no reset after the hedge's last close", func(s *Snapshot) {
			s.Deals[7].Amount, s.Deals[7].BalanceAfter = dec("150.00"), dec("-50.00")
			s.Accounts[2].Balance = dec("-50.00")
		}, "close deal 8 (position 21, key close:21:0.1) left the balance at -50 with nothing open and no ADJUSTMENT follows it"},
		{"a partial close below zero waits", func(s *Snapshot) {
			// Account 3's losing leg closed in part (0.2 of 0.3): the position itself is still open.
			s.Deals[6].Key = "close:20:0.3"
		}, ""},
		{"a close-by leg closed in part below zero waits", func(s *Snapshot) {
			// Closed by 0.2 of its 0.3: still open, so no position.closed event tells.
			s.Deals[6].Key = "close:20:by:t3-closeby-1:0.3"
			s.Events = slices.Delete(s.Events, 6, 7)
		}, ""},
		{"a close the events do not place", func(s *Snapshot) { s.Events = s.Events[:4] },
			"close deal 7 (key close:20:0.2) left -200, and the events do not say what it left open"},
		{"a protected account a swap took below zero, its position still open", func(s *Snapshot) {
			s.Deals = append(s.Deals, dbDeal{ID: 10, Account: 1, Type: "SWAP", Amount: dec("-1.20"), BalanceAfter: dec("-1.20"), Position: nid(12), Key: "swap:12:2025-03-05"})
			s.Accounts[0].Balance = dec("-1.20")
			s.Positions = append(s.Positions, dbPosition{ID: 12, Account: 1, Status: "OPEN"})
		}, ""},
	})
}
