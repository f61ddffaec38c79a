package invariant

import (
	"encoding/json"
	"net/http"
	"testing"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// frontDoorFixture is one flood on web1 from 0 s to 5 s, answered at every door as documented,
// with the holder renewing through it; and one reused nonce refused 422.
func frontDoorFixture() *money {
	attacker := func(seq int64, op, method string, status int, resp string) Entry {
		e := answer(seq, AttackerClient, op, method, "/api/fx/accounts", status, resp, at(1), at(1.1))
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			e.RetryAfter = "1"
		}
		return e
	}
	journal := []Entry{
		attacker(1, "flood-stream", http.MethodGet, 200, ``),
		attacker(2, "flood-stream", http.MethodGet, 429, errBody(fx.ELIMITED, "slow down")),
		attacker(3, "flood-badToken", http.MethodGet, 401, errBody(fx.EUNAUTH, "unknown token")),
		// The real refusals, from where the desk words them.
		attacker(4, "flood-badToken", http.MethodGet, 503, errBody(fx.ErrorCode(auth.ErrBusy), fx.ErrorMessage(auth.ErrBusy))),
		attacker(5, "flood-oversized", http.MethodPost, 413, errBody(fx.ETOOLARGE, fx.TooLarge(BodyLimit).Message)),
		attacker(6, "flood-contentType", http.MethodPost, 400, errBody(fx.EINVALID, "Content-Type")),
		attacker(7, "flood-dupKey", http.MethodPost, 400, errBody(fx.EINVALID, "duplicate key")),
		answer(8, "t1", "open", http.MethodPost, "/api/fx/orders", 201, `{"order":{"id":100}}`, at(2), at(2.1)),
		answer(9, "t1", "reusedNonce", http.MethodPost, "/api/fx/orders", 422,
			errBody(fx.EKEYREUSED, "requestNonce t1-order-1 was already used for another request"), at(3), at(3.1)),
	}
	return &money{
		s: &Snapshot{
			Taken:    at(100),
			Accounts: []dbAccount{{ID: 1, User: 1001}},
			Orders:   []dbOrder{{ID: 100, Account: 1, Nonce: nstr("t1-order-1"), Status: "FILLED"}},
		},
		ev: &Evidence{
			Journal: journal,
			Floods: []Flood{{Target: "web1", Start: at(0), End: at(5), Streams: StreamsPerToken + 2, Accepted: StreamsPerToken,
				Holder: "web1", HolderAfter: "web1", Judged: true, Before: RenewCounts{OK: 10}, After: RenewCounts{OK: 15}}},
			Reuses: []Reuse{{Account: 1, Nonce: "t1-order-1", OrderID: 100, Seq: 9}, {Skipped: "no accepted order yet"}},
		},
	}
}

func TestFrontDoorCheckFlagsAnAttackerAnsweredOutsideItsDoorsOrHarmingTheHolder(t *testing.T) {
	runCases(t, frontDoorFixture, func(m *money) Result { return checkFlood(m.s, m.ev) }, []checkCase[*money]{
		{"a bad body accepted", func(m *money) { m.ev.Journal[6].Status = 201 }, "journal 7: the attacker's flood-dupKey POST /api/fx/accounts answered 201"},
		{"a 5xx", func(m *money) { m.ev.Journal[2].Status = 500 }, "journal 3: the attacker's flood-badToken GET /api/fx/accounts answered 500"},
		{"a 429 without Retry-After", func(m *money) { m.ev.Journal[1].RetryAfter = "" }, "journal 2: the attacker's flood-stream answered 429 without Retry-After"},
		{"a 503 that is not the token-lookup refusal", func(m *money) {
			m.ev.Journal[3].Resp = json.RawMessage(errBody(fx.EUNAVAILABLE, fx.MsgDatabaseUnavailable))
		}, "journal 4: the attacker's unknown token answered 503 but not the token-lookup refusal"},
		{"a 413 that is not too_large", func(m *money) { m.ev.Journal[4].Resp = json.RawMessage(errBody(fx.EINVALID, "too big")) },
			"journal 5: the attacker's oversized body answered 413 but not too_large"},
		{"an account of the attacker's", func(m *money) { m.s.Accounts = append(m.s.Accounts, dbAccount{ID: 2, User: AttackerUser}) },
			"account 2 belongs to the attacker"},
		{"more streams accepted than the cap", func(m *money) { m.ev.Floods[0].Accepted = StreamsPerToken + 1 },
			"flood 1 on web1 at 12:00:00.000: 9 streams of the attacker's token accepted, its cap is 8"},
		{"more requests passed than the token's rate", func(m *money) {
			for i := range 3 * RatePerToken {
				m.ev.Journal = append(m.ev.Journal, answer(int64(100+i), AttackerClient, "flood-dupKey", http.MethodPost, "/api/fx/accounts", 400,
					errBody(fx.EINVALID, "duplicate key"), at(1), at(1.5)))
			}
		}, "requests of the attacker's token passed its rate in 500ms, at most 126 may"},
		{"as many limited as passed", func(m *money) {
			for i := range 3 * RatePerToken {
				e := answer(int64(100+i), AttackerClient, "flood-dupKey", http.MethodPost, "/api/fx/accounts", 429, errBody(fx.ELIMITED, "slow down"), at(1), at(1.5))
				e.RetryAfter = "1"
				m.ev.Journal = append(m.ev.Journal, e)
			}
		}, ""},
		{"the holder's renews failed", func(m *money) { m.ev.Floods[0].After.Failed = 1 }, "the holder web1's lease renews failed 1 and lost 0 times meanwhile"},
		{"the holder renewed nothing", func(m *money) { m.ev.Floods[0].After.OK = 10 }, "the holder web1 renewed no lease meanwhile"},
		{"the holder changed", func(m *money) { m.ev.Floods[0].HolderAfter = "web2" }, `web1 held the lease before, "web2" after`},
		{"renews failed in a flood that was not judged", func(m *money) {
			m.ev.Floods[0].After.Failed, m.ev.Floods[0].Judged, m.ev.Floods[0].Why = 1, false, "holder's /metrics after: timeout"
		}, ""},
	})
}

func TestReusedNonceCheckFlagsAReuseNotRefused422OrThatWroteAnOrder(t *testing.T) {
	runCases(t, frontDoorFixture, func(m *money) Result { return checkReusedNonce(m.s, m.ev) }, []checkCase[*money]{
		{"the reuse was accepted", func(m *money) {
			m.ev.Journal[8].Status, m.ev.Journal[8].Resp = 201, json.RawMessage(`{"order":{"id":101}}`)
		},
			"journal 9: requestNonce t1-order-1 (order 100) reused with another body answered answered 201"},
		{"the refusal does not name the key", func(m *money) {
			m.ev.Journal[8].Resp = json.RawMessage(errBody(fx.EKEYREUSED, "already used"))
		}, "journal 9: requestNonce t1-order-1"},
		{"the reuse's outcome is unknown", func(m *money) { m.ev.Journal[8].Outcome, m.ev.Journal[8].Status = OutcomeUnknown, 0 },
			"reused with another body answered outcome unknown 0"},
		{"the reuse wrote a second order", func(m *money) {
			m.s.Orders = append(m.s.Orders, dbOrder{ID: 101, Account: 1, Nonce: nstr("t1-order-1"), Status: "FILLED"})
		}, "account 1 requestNonce t1-order-1: orders [100 101] in the database, the first request was answered with order 100"},
		{"the reuse ended after the snapshot", func(m *money) { m.ev.Journal[8].Status = 201; m.s.Taken = at(3.05) }, ""},
	})
}

func TestLoadNotLimitedCheckFlagsA429ToTheSoaksOwnTraders(t *testing.T) {
	runCases(t, frontDoorFixture, func(m *money) Result { return checkLoadNotLimited(m.ev) }, []checkCase[*money]{
		{"a trader answered 429", func(m *money) {
			m.ev.Journal[7].Status, m.ev.Journal[7].Resp = 429, json.RawMessage(errBody(fx.ELIMITED, "Too many requests for this token"))
		}, "journal 8: t1's open /api/fx/orders answered 429 Too many requests for this token (no fault)"},
	})
}
