package invariant

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"fxdesk/internal/fx"
)

// floodRefusals are the answers each of the attacker's requests may get: its door's documented
// refusal, or 429 from the attacker's address's rate (perAddress runs before every other door).
// A stream may also be accepted, up to the token's cap. An unknown token may also find every
// token lookup slot taken (503 with Retry-After, auth.ErrBusy).
var floodRefusals = map[string][]int{
	"flood-stream":      {http.StatusOK, http.StatusTooManyRequests},
	"flood-badToken":    {http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable},
	"flood-oversized":   {http.StatusRequestEntityTooLarge, http.StatusTooManyRequests},
	"flood-contentType": {http.StatusBadRequest, http.StatusTooManyRequests},
	"flood-dupKey":      {http.StatusBadRequest, http.StatusTooManyRequests},
}

// The attacker is refused at every door and never harms the desk: every answer it got is its
// door's refusal (a 429 with Retry-After; never a 5xx, never a 2xx but a stream within the cap),
// an oversized body's 413 is too_large; it never holds more streams on a process than its
// token's cap; the requests that passed its token's rate are at most the bucket (twice the rate)
// plus the rate over the time they took; no account of its exists; and the lease holder renewed
// through each flood, every renew ok, still the holder after — but for a renew another fault
// may have failed or lost (floodRenews).
func checkFlood(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "frontDoor"}
	refused, got, limited := 0, 0, 0
	for _, e := range ev.Journal {
		if e.Client != AttackerClient || e.Outcome != Answered {
			continue
		}
		got++
		ok := false
		for _, st := range floodRefusals[e.Op] {
			ok = ok || e.Status == st
		}
		switch {
		case !ok:
			r.Add("", "journal %d: the attacker's %s %s %s answered %d %s (%s)", e.Seq, e.Op, e.Method, e.Path, e.Status, Truncate(string(e.Resp), 160), ev.during(e.Start, e.End))
		case (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) && e.RetryAfter == "":
			r.Add("", "journal %d: the attacker's %s answered %d without Retry-After: %s", e.Seq, e.Op, e.Status, Truncate(string(e.Resp), 160))
		case e.Status == http.StatusServiceUnavailable && !strings.Contains(string(e.Resp), "checking as many bearer tokens"):
			r.Add("", "journal %d: the attacker's unknown token answered 503 but not the token-lookup refusal: %s", e.Seq, Truncate(string(e.Resp), 160))
		case e.Status == http.StatusRequestEntityTooLarge && !strings.Contains(string(e.Resp), fx.ETOOLARGE):
			r.Add("", "journal %d: the attacker's oversized body answered 413 but not %s: %s", e.Seq, fx.ETOOLARGE, Truncate(string(e.Resp), 160))
		}
		if e.Status != http.StatusOK {
			refused++
		}
		if e.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	for _, a := range s.Accounts {
		if a.User == AttackerUser {
			r.Add("", "account %d belongs to the attacker (user %d): one of its refused bodies made it", a.ID, a.User)
		}
	}
	judged, renews, excused := 0, 0.0, 0.0
	for i, f := range ev.Floods {
		if f.Accepted > StreamsPerToken {
			r.Add("", "flood %d on %s at %s: %d streams of the attacker's token accepted, its cap is %d", i+1, f.Target, TimeOfDay(f.Start), f.Accepted, StreamsPerToken)
		}
		// The requests that reached the token's bucket at the target: streams and bodies that
		// parse as far as the handler (the body doors come before the token's).
		var passed int
		var first, last time.Time
		for _, e := range ev.Journal {
			if e.Client != AttackerClient || e.Proc != f.Target || e.Start.Before(f.Start) || e.Start.After(f.End) ||
				(e.Op != "flood-stream" && e.Op != "flood-dupKey") {
				continue
			}
			if first.IsZero() || e.Start.Before(first) {
				first = e.Start
			}
			if e.End.After(last) {
				last = e.End
			}
			if e.Outcome == Answered && e.Status != http.StatusTooManyRequests {
				passed++
			}
		}
		if bound := 2*RatePerToken + int(RatePerToken*last.Sub(first).Seconds()) + 1; !first.IsZero() && passed > bound {
			r.Add("", "flood %d on %s at %s: %d requests of the attacker's token passed its rate in %s, at most %d may", i+1, f.Target, TimeOfDay(f.Start), passed, last.Sub(first).Round(time.Millisecond), bound)
		}
		if !f.Judged {
			continue
		}
		judged++
		renews += f.After.OK - f.Before.OK
		own, others, lostToOther := floodRenews(ev, f)
		excused += others
		flood := fmt.Sprintf("flood %d on %s at %s–%s", i+1, f.Target, TimeOfDay(f.Start), TimeOfDay(f.End))
		switch {
		case len(own) > 0:
			r.Add("", "%s: the holder %s's lease renews failed %.0f and lost %.0f times meanwhile: %s", flood, f.Holder,
				f.After.Failed-f.Before.Failed, f.After.Lost-f.Before.Lost, strings.Join(own, "; "))
		case lostToOther:
			// Lost to a fault before the flood: no renew of the holder's succeeds again, and the
			// lease has moved on, because of that fault.
		case f.After.OK <= f.Before.OK:
			r.Add("", "%s: the holder %s renewed no lease meanwhile (%.0f ok before, %.0f after)", flood, f.Holder, f.Before.OK, f.After.OK)
		case f.HolderAfter != f.Holder:
			r.Add("", "%s: %s held the lease before, %q after", flood, f.Holder, f.HolderAfter)
		}
	}
	r.Figures = fmt.Sprintf("%d floods (%d with the holder's renews judged, %.0f renews ok in them, %.0f failed or lost left to a fault under way when they began), %d attacker answers, %d refused, %d of them 429",
		len(ev.Floods), judged, renews, excused, got, refused, limited)
	return r
}

// floodRenews places each renew of the holder's that failed or was lost during flood f, and
// returns those that are the flood's (one line each, for the report), how many are another
// fault's, and whether the lease was lost to one.
//
// A renew counted by one read of the holder's /metrics and not by the read before it ended after
// that earlier read was sent, and it took at most what the failed and lost renews between the
// two reads took in all (the histogram's sums): it began after the earlier read was sent less
// that time, and before the later read was answered. It is another fault's when a fault that
// may fail renews (LeaseFault) was in effect at some instant of that span — it began during
// that fault or before its end, and was under way through it — and the flood's otherwise. The
// reads are a SampleEvery apart, so a renew that began more than a read's interval and its own
// duration after the last such fault ended is surely the flood's.
func floodRenews(ev *Evidence, f Flood) (own []string, others float64, lostToOther bool) {
	reads := slices.Concat([]RenewRead{f.Before}, f.Reads, []RenewRead{f.After})
	for i := 1; i < len(reads); i++ {
		prev, cur := reads[i-1], reads[i]
		failed, lost := cur.Failed-prev.Failed, cur.Lost-prev.Lost
		if failed+lost <= 0 {
			continue
		}
		took := time.Duration((cur.FailedSeconds - prev.FailedSeconds + cur.LostSeconds - prev.LostSeconds) * float64(time.Second))
		from, to := prev.Sent.Add(-took), cur.Recv
		if leaseFaultIn(ev.Windows, from, to) {
			others += failed + lost
			lostToOther = lostToOther || lost > 0
			continue
		}
		own = append(own, fmt.Sprintf("one ended between %s and %s after %s (%s)", TimeOfDay(prev.Sent), TimeOfDay(cur.Recv),
			took.Round(time.Millisecond), renewBeside(ev.Windows, from, to)))
	}
	return own, others, lostToOther
}

// leaseFaultIn reports whether a fault that may fail renews (LeaseFault) was in effect at some
// instant of [from, to].
func leaseFaultIn(windows []Window, from, to time.Time) bool {
	for _, w := range windows {
		if LeaseFault(w.Kind) && !w.Start.After(to) && !w.End.Before(from) {
			return true
		}
	}
	return false
}

// renewBeside says, for a renew of the flood's that began after from and ended by to, how long
// after the last fault that may fail renews ended it began at the earliest, and which other
// faults (a venue's) were in effect meanwhile.
func renewBeside(windows []Window, from, to time.Time) string {
	var last *Window
	var beside []string
	for i, w := range windows {
		switch {
		case LeaseFault(w.Kind) && w.End.Before(from) && (last == nil || w.End.After(last.End)):
			last = &windows[i]
		case !LeaseFault(w.Kind) && w.Kind != FaultFlood && !w.Start.After(to) && !w.End.Before(from):
			beside = append(beside, w.Kind+"@"+TimeOfDay(w.Start))
		}
	}
	what := "no fault that may fail renews before it"
	if last != nil {
		what = fmt.Sprintf("begun %s or more after %s@%s ended", from.Sub(last.End).Round(time.Millisecond), last.Kind, TimeOfDay(last.Start))
	}
	if len(beside) > 0 {
		what += ", beside " + strings.Join(beside, ", ")
	}
	return what
}

// A requestNonce reused with another body is refused 422 idempotency_key_reused naming the key,
// and nothing is written: the nonce still names one order, the one its first request was
// answered with (the nonces invariant checks one order per nonce for every account).
func checkReusedNonce(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "reusedNonce"}
	bySeq := map[int64]Entry{}
	for _, e := range ev.Journal {
		if e.Op == "reusedNonce" {
			bySeq[e.Seq] = e
		}
	}
	checked, skipped := 0, 0
	for _, u := range ev.Reuses {
		if u.Skipped != "" {
			skipped++
			continue
		}
		e, ok := bySeq[u.Seq]
		if !ok || !e.End.Before(s.Taken) {
			continue
		}
		checked++
		var b struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		e.Decode(&b)
		if e.Outcome != Answered || e.Status != http.StatusUnprocessableEntity || b.Error.Code != fx.EKEYREUSED || !strings.Contains(b.Error.Message, u.Nonce) {
			r.Add("", "journal %d: requestNonce %s (order %d) reused with another body answered %s %d %s (%s)", e.Seq, u.Nonce, u.OrderID, e.Outcome, e.Status,
				Truncate(string(e.Resp), 200), ev.during(e.Start, e.End))
		}
		var ids []int64
		for _, o := range s.Orders {
			if o.Account == u.Account && o.Nonce.Valid && o.Nonce.String == u.Nonce {
				ids = append(ids, o.ID)
			}
		}
		if len(ids) != 1 || ids[0] != u.OrderID {
			r.Add("", "account %d requestNonce %s: orders %v in the database, the first request was answered with order %d", u.Account, u.Nonce, ids, u.OrderID)
		}
	}
	r.Figures = fmt.Sprintf("%d nonces reused with another body, %d faults with nothing to reuse", checked, skipped)
	return r
}

// The soak's own load is never refused at a limit: the front door's rates are set for traders
// like these, and the attacker's flood spends only its own token's and address's budgets.
func checkLoadNotLimited(ev *Evidence) Result {
	r := Result{Name: "loadNotLimited"}
	n := 0
	for _, e := range ev.Journal {
		if e.Client == AttackerClient {
			continue
		}
		n++
		if e.Outcome == Answered && e.Status == http.StatusTooManyRequests {
			r.Add("", "journal %d: %s's %s %s answered 429 %s (%s)", e.Seq, e.Client, e.Op, route(e.Path), Truncate(e.ErrorMessage(), 120), ev.during(e.Start, e.End))
		}
	}
	r.Figures = fmt.Sprintf("%d requests of the load", n)
	return r
}
