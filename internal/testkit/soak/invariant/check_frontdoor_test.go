package invariant

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

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
			// The holder's /metrics read before the flood, every second through it, and after;
			// a MySQL cut ended well before it.
			Floods: []Flood{{Target: "web1", Start: at(0), End: at(5), Streams: StreamsPerToken + 2, Accepted: StreamsPerToken,
				Holder: "web1", HolderAfter: "web1", Judged: true, Before: renewRead(-0.05, 10),
				Reads: []RenewRead{renewRead(1, 11), renewRead(2, 12), renewRead(3, 13), renewRead(4, 14)}, After: renewRead(5, 15)}},
			Windows: []Window{{Kind: FaultCut, Start: at(-8), End: at(-5), Note: "mysql"}},
			Reuses:  []Reuse{{Account: 1, Nonce: "t1-order-1", OrderID: 100, Seq: 9}, {Skipped: "no accepted order yet"}},
		},
	}
}

// renewRead is a read of the holder's renew counters sent at sec, answered 10 ms later.
func renewRead(sec, ok float64) RenewRead {
	return RenewRead{Sent: at(sec), Recv: at(sec).Add(10 * time.Millisecond), RenewCounts: RenewCounts{OK: ok}}
}

// renewEnded has one more renew of outcome (failed or lost), which took took seconds, end between
// the flood's read i-1 and read i (Before is read 0, After the last): read i and every later one
// count it.
func renewEnded(f *Flood, i int, outcome string, took float64) {
	reads := []*RenewRead{&f.Before}
	for j := range f.Reads {
		reads = append(reads, &f.Reads[j])
	}
	reads = append(reads, &f.After)
	for _, r := range reads[i:] {
		switch outcome {
		case "failed":
			r.Failed++
			r.FailedSeconds += took
		case "lost":
			r.Lost++
			r.LostSeconds += took
		}
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
		// The soak's five-minute FIX run (seed 1636334274): the flood began ~150 ms after a Redis
		// cut ended. A renew that was under way when the cut ended and failed 0.5 s after it
		// began is the cut's, not the flood's, though the flood's first reads counted it.
		{"a renew under way when a cut ended is the cut's", func(m *money) {
			m.ev.Windows[0] = Window{Kind: FaultCut, Start: at(-2), End: at(-0.15), Note: "redis"}
			renewEnded(&m.ev.Floods[0], 1, "failed", 0.5)
		}, ""},
		// The same cut, and a renew that began inside the flood, long after the cut ended, and
		// failed: the flood's (its own window excuses nothing).
		{"a renew begun after the cut ended is the flood's", func(m *money) {
			m.ev.Windows[0] = Window{Kind: FaultCut, Start: at(-2), End: at(-0.15), Note: "redis"}
			m.ev.Windows = append(m.ev.Windows, Window{Kind: FaultFlood, Start: at(0), End: at(5), Note: "web1"})
			renewEnded(&m.ev.Floods[0], 2, "failed", 0.5)
		}, "the holder web1's lease renews failed 1 and lost 0 times meanwhile: one ended between 12:00:01.000 and 12:00:02.010 after 500ms (begun 650ms or more after cut@11:59:58.000 ended)"},
		// A lease lost to a zombie whose window ended as the flood began: its renew was lost,
		// and the holder changed, because of the zombie.
		{"a lease lost under way through a zombie's end is the zombie's", func(m *money) {
			m.ev.Windows[0] = Window{Kind: "zombie", Start: at(-5), End: at(-0.1), Note: "web1 stopped, replaced, resumed as a zombie"}
			f := &m.ev.Floods[0]
			renewEnded(f, 1, "lost", 0.2)
			for i := range f.Reads {
				f.Reads[i].OK = 10
			}
			f.After.OK, f.HolderAfter = 10, "web3"
		}, ""},
		// A venue fault never reaches the lease: beside it a failed renew is the flood's.
		{"a venue fault beside the renew excuses nothing", func(m *money) {
			m.ev.Windows = append(m.ev.Windows, Window{Kind: "venueOutage", Start: at(0.5), End: at(2.5)})
			renewEnded(&m.ev.Floods[0], 2, "failed", 0.5)
		}, "after 500ms (begun 5.5s or more after cut@11:59:52.000 ended, beside venueOutage@12:00:00.500)"},
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
