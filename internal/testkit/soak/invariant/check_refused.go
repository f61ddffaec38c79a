package invariant

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// The refused-request lane (docs/soak.md, «The refused-request lane») sends requests the desk
// must refuse: staff tokens on routes outside their role's permissions and a read-only trader's
// token trading, each journaled under an op that names what it lacks, and an expiring and a
// revoked token, still used past their bound.
const (
	// OpRefused, followed by what the request lacks as the refusal names it ("money permission",
	// "trade scope"): the request must be answered 403 naming it.
	OpRefused = "refused:"
	// FourEyes is what a finance user approving a money request of their own lacks: a second
	// user (docs/identity.md, «Four eyes on client money»).
	FourEyes = "four eyes"
	// OpExpiredToken and OpRevokedToken are the expiring and the revoked token's requests: each
	// must be answered 401 once its token's bound has passed.
	OpExpiredToken = "expiredToken"
	OpRevokedToken = "revokedToken"
)

// refusalNames is what the 403 refusing a request that lacks need must say.
func refusalNames(need string) string {
	if need == FourEyes {
		return "another finance user must approve it"
	}
	return "the " + need
}

// holderAway reports whether e is the 503 a desk-priced route answers while no lease holder
// serves it (a follower forwarding to a holder stopped, killed or being replaced, or a new holder
// whose risk view is still loading): the four-eyes
// check runs on the holder, so such an answer did nothing. A guard's refusal never meets it: a
// guard runs before the forward.
func holderAway(e Entry) bool {
	return e.Outcome == Answered && e.Status == http.StatusServiceUnavailable && (e.ErrorMessage() == fx.MsgPricingUnavailable || e.ErrorMessage() == fx.MsgRiskViewLoading)
}

// ExpirySkew is how long past a token's expiresAt a process may still take it: the desk's clock
// and the one the command line stamped the expiry with may differ by this much.
const ExpirySkew = time.Second

// Refusals is what the refused-request lane knows beside its requests in the journal.
type Refusals struct {
	// Expires is the expiring token's expiresAt, as its row holds it.
	Expires time.Time
	// Revoked is when the soak saw the revoked token's revocation committed (zero: not yet). A
	// process that resolved the token before then honours it for auth.CacheFor at most.
	Revoked time.Time
	// ReadOnlyAccount is the account of the read-only trader, used by no other client: Before is
	// what it held when the lane began.
	ReadOnlyAccount int64
	Before          AccountActivity
}

// AccountActivity is what requests can create on an account: its orders, its positions and its
// deals but the swaps (a rollover run charges them, no request asks for them).
type AccountActivity struct {
	Orders, Positions, Deals int
}

func (a AccountActivity) String() string {
	return fmt.Sprintf("%d orders, %d positions, %d deals but swaps", a.Orders, a.Positions, a.Deals)
}

// Activity is account's activity in s.
func Activity(s *Snapshot, account int64) AccountActivity {
	var a AccountActivity
	for _, o := range s.Orders {
		if o.Account == account {
			a.Orders++
		}
	}
	for _, p := range s.Positions {
		if p.Account == account {
			a.Positions++
		}
	}
	for _, d := range s.Deals {
		if d.Account == account && d.Type != "SWAP" {
			a.Deals++
		}
	}
	return a
}

// refusedChangedNothing: every request the desk had to refuse was refused, and changed nothing.
// A request lacking a permission or scope is answered 403 naming it; the expiring token's
// requests from its expiry (+ ExpirySkew) and the revoked token's from auth.CacheFor after its
// revocation are answered 401 — a 2xx, a 500 or any other answer is a violation. An answer the
// client never got, or a 503 met before the token was resolved (unavailableBeforeAnything), is
// not judged, but whatever the answer no audit row carries such a request's id, and the read-only
// trader's account holds what it held when the lane began.
//
// One 2xx past the revoked token's bound is the desk's documented behaviour (docs/identity.md,
// «Expiry, revocation and last use»): a process that cannot look the token up because the
// database is away, and missed the revocation's announcement, honours what it resolved before,
// for auth.StaleFor. It is excused while a database outage overlapped the request (plus a second
// for the pool to reconnect) — unless that process had already refused the token since its
// revocation: the lookup that refused it dropped what it had cached, so it has nothing left to
// honour. A flood no longer excuses it: a token seen before looks up in slots of its own.
func checkRefusedChangedNothing(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "refusedChangedNothing"}
	rf := ev.Refusals
	if rf == nil {
		r.Figures = "the refused-request lane did not run"
		return r
	}
	audits := map[string][]dbAudit{}
	for _, a := range s.Audits {
		if a.RequestID.Valid {
			audits[a.RequestID.String] = append(audits[a.RequestID.String], a)
		}
	}
	expiredFrom := rf.Expires.Add(ExpirySkew)
	var revokedFrom time.Time
	if !rf.Revoked.IsZero() {
		revokedFrom = rf.Revoked.Add(auth.CacheFor)
	}
	// forgot is when each process first refused the revoked token after its revocation.
	forgot := map[string]time.Time{}
	for _, e := range ev.Journal {
		if e.Op == OpRevokedToken && !rf.Revoked.IsZero() && !e.Start.Before(rf.Revoked) && e.Outcome == Answered && e.Status == http.StatusUnauthorized {
			if t, ok := forgot[e.Proc]; !ok || e.End.Before(t) {
				forgot[e.Proc] = e.End
			}
		}
	}
	honoursStale := func(e Entry) bool {
		if t, ok := forgot[e.Proc]; ok && t.Before(e.Start) {
			return false
		}
		for _, w := range ev.Windows {
			if DatabaseOutage(w) && !w.Start.After(e.End) && !w.End.Add(time.Second).Before(e.Start) {
				return true
			}
		}
		return false
	}
	type tally struct{ sent, refused, unanswered, unavailable, ok int }
	var lacking, expiredBefore, expiredAfter, revokedBefore, revokedAfter tally
	excused := 0
	// judge holds e, which had to be refused with want (naming names, when given) because of
	// why, to its answer and the audit log. Each row is keyed by its journal entry: a later
	// check names more faults around it, and the row keeps its place.
	judge := func(t *tally, e Entry, want int, names, why string) {
		t.sent++
		if e.RequestID == "" {
			r.Add(fmt.Sprintf("journal %d: no request id", e.Seq), "journal %d: %s's %s %s was sent with no request id: the audit log cannot be searched for it", e.Seq, e.Client, e.Method, route(e.Path))
		}
		for _, a := range audits[e.RequestID] {
			r.Add(fmt.Sprintf("journal %d: audit %d", e.Seq, a.ID), "journal %d: %s's %s %s (request %s) %s, yet audit %d (%s %s %s) carries its request id",
				e.Seq, e.Client, e.Method, e.Path, e.RequestID, why, a.ID, a.Action, a.EntityType, a.EntityID)
		}
		switch {
		case e.Outcome != Answered:
			t.unanswered++
		case unavailableBeforeAnything(e), names == refusalNames(FourEyes) && holderAway(e):
			t.unavailable++
		case e.Status == want && strings.Contains(e.ErrorMessage(), names):
			t.refused++
		default:
			expected := fmt.Sprint(want)
			if names != "" {
				expected += " naming " + names
			}
			answer := fmt.Sprint(e.Status)
			if msg := e.ErrorMessage(); msg != "" {
				answer += fmt.Sprintf(" %q", Truncate(msg, 120))
			}
			r.Add(fmt.Sprintf("journal %d: answer", e.Seq), "journal %d: %s's %s %s on %s %s, answered %s, not %s (%s)", e.Seq, e.Client, e.Method, e.Path, e.Proc, why,
				answer, expected, ev.during(e.Start, e.End))
		}
	}
	for _, e := range ev.Journal {
		need, refusal := strings.CutPrefix(e.Op, OpRefused)
		switch {
		case refusal:
			judge(&lacking, e, http.StatusForbidden, refusalNames(need), "lacks the "+need)
		case e.Op == OpExpiredToken && e.Start.Before(expiredFrom):
			expiredBefore.sent++
			if e.OK() {
				expiredBefore.ok++
			}
		case e.Op == OpExpiredToken:
			judge(&expiredAfter, e, http.StatusUnauthorized, "", "sent "+e.Start.Sub(rf.Expires).Round(time.Millisecond).String()+" after its token expired at "+TimeOfDay(rf.Expires))
		case e.Op == OpRevokedToken && (revokedFrom.IsZero() || e.Start.Before(revokedFrom)):
			revokedBefore.sent++
			if e.OK() {
				revokedBefore.ok++
			}
		case e.Op == OpRevokedToken && e.OK() && honoursStale(e):
			revokedAfter.sent++
			excused++
		case e.Op == OpRevokedToken:
			judge(&revokedAfter, e, http.StatusUnauthorized, "", "sent "+e.Start.Sub(rf.Revoked).Round(time.Millisecond).String()+" after its token was revoked at "+TimeOfDay(rf.Revoked))
		}
	}
	if now := Activity(s, rf.ReadOnlyAccount); now != rf.Before {
		r.Add("readOnly", "the read-only trader's account %d holds %s, but held %s when the lane began: no other client uses it", rf.ReadOnlyAccount, now, rf.Before)
	}
	revoked := "not revoked yet"
	if !rf.Revoked.IsZero() {
		revoked = "revoked " + TimeOfDay(rf.Revoked)
	}
	r.Figures = fmt.Sprintf("lacking a permission or scope: %d sent, %d refused 403, %d unanswered, %d a 503 that did nothing; "+
		"expiring token (expired %s): %d before (%d 2xx), %d after (%d refused 401); revoked token (%s): %d before its bound (%d 2xx), %d after (%d refused 401, %d 2xx in a database outage or flood); read-only account %d: %s",
		lacking.sent, lacking.refused, lacking.unanswered, lacking.unavailable,
		TimeOfDay(rf.Expires), expiredBefore.sent, expiredBefore.ok, expiredAfter.sent, expiredAfter.refused,
		revoked, revokedBefore.sent, revokedBefore.ok, revokedAfter.sent, revokedAfter.refused, excused, rf.ReadOnlyAccount, rf.Before)
	return r
}
