package invariant

import (
	"fmt"
	"sort"
	"time"
)

// publishedLive reports whether snapshot m was published by a holder whose term was still the
// lease's: the row read one sampling period before its publishedAt (surely before the publish)
// had no term newer than term, the row term m carries (rowTerm). A snapshot from a process that
// had already been replaced is a zombie's.
func publishedLive(rows []RowSample, m MirrorSample, term int64) (bool, int64) {
	at, err := time.Parse(time.RFC3339Nano, m.PublishedAt)
	if err != nil {
		return false, 0
	}
	lt := liveTerm(rows, at.Add(-SampleEvery))
	return term >= lt, lt
}

// rowTerms gives the row term each snapshot sample answers to: its own term, or for term 0 — a
// holder no row numbered, granted by Redis while its MySQL did not answer (or failing open) — the
// row's term when its run of term-0 snapshots began, the term that holder came after. A snapshot
// names no publisher, so a run that begins after a numbered snapshot is a new holder's (as after
// a holder died during a MySQL cut), never the old one resumed.
func rowTerms(rows []RowSample, mirrors []MirrorSample) func(MirrorSample) int64 {
	ms := append([]MirrorSample(nil), mirrors...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].At.Before(ms[j].At) })
	followed := map[string]int64{}
	base := int64(-1) // no run
	for _, m := range ms {
		switch {
		case !m.Present:
		case m.Term != 0:
			base = -1
		default:
			if base < 0 {
				pub, err := time.Parse(time.RFC3339Nano, m.PublishedAt)
				if err != nil {
					continue // publishedLive refuses it
				}
				base = liveTerm(rows, pub)
			}
			if _, ok := followed[m.PublishedAt]; !ok {
				followed[m.PublishedAt] = base
			}
		}
	}
	return func(m MirrorSample) int64 {
		if m.Term != 0 {
			return m.Term
		}
		return followed[m.PublishedAt]
	}
}

// liveTerm is the lease row's term as last read at or before t (0 when unknown).
func liveTerm(rows []RowSample, t time.Time) int64 {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].At.After(t) })
	for i--; i >= 0; i-- {
		if rows[i].Err == "" && rows[i].OK {
			return rows[i].Row.Term
		}
	}
	return 0
}

func sortedRows(rows []RowSample) []RowSample {
	out := append([]RowSample(nil), rows...)
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Only the live holder's snapshots in the mirror: the snapshot's term never goes backwards, no
// snapshot was published after its term was replaced in the lease row, and within one publish
// interval (plus sampling slack) of a new term in the lease row, the snapshot
// carries it — unless Redis was cut or failed over meanwhile, when nobody can publish or what
// was published may be lost, or the holder of that term was SIGSTOPped (a stop or zombie fault)
// before its first snapshot, when it cannot publish until it resumes.
//
// Term 0 is a holder granted by Redis alone, which publishes so that fxdesk-cron keeps its
// prices. The mirror does not fence term 0 (internal/mirror, termFence) and neither does this
// check as far as order goes: a term-0 snapshot is not a term going back, and it does not move
// the newest term. It is held to the row all the same, through the term it came after
// (rowTerms): none is published once the row has moved past that term, and none is left behind
// an interval after.
func checkMirrorTerm(ev *Evidence) Result {
	r := Result{Name: "mirrorTerm"}
	rows := sortedRows(ev.Rows)
	ms := append([]MirrorSample(nil), ev.Mirrors...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].At.Before(ms[j].At) })
	rowTerm := rowTerms(rows, ms)
	var maxTerm int64
	var maxAt time.Time
	backwards, stale, zombie, unnumbered := 0, 0, 0, 0
	excusedCut, excusedStop := 0, 0 // behind past the bound, while nobody could publish
	lastZombie := ""
	var episode *MirrorSample
	present := 0
	// since is when the row first showed term t, and the process it named.
	since := func(t int64) (time.Time, int) {
		for _, rs := range rows {
			if rs.OK && rs.Row.Term >= t {
				return rs.At, rs.Row.PID
			}
		}
		return time.Time{}, 0
	}
	redisCut := func(a, b time.Time) bool {
		for _, w := range ev.Windows {
			if (w.Kind == FaultCut && w.Note == "redis" || w.Kind == FaultSentinelFailover) && !w.Start.After(b) && !w.End.Before(a) {
				return true
			}
		}
		return false
	}
	// A new term's first snapshot is due within this of the row first showing it.
	due := MirrorInterval + 1500*time.Millisecond
	// The holder the row names publishes at once, but not while it is SIGSTOPped: a stop fault
	// (resumed alone) or a zombie fault (replaced, resumed having lost) that stopped it moments
	// after it took the lease leaves the old term's snapshot until it resumes, or until its
	// replacement publishes a newer term. Only a stop of that holder excuses the snapshot; a stop
	// of any other process leaves the holder free to publish, and only a stop that could have
	// kept it from its first snapshot: begun before that snapshot was due (t0 + due) and not
	// over before the term began.
	//
	// The stops are the holder's process record, kept as the soak signals it, and the fault
	// windows naming it. A window is noted only once its fault has played out — a zombie's at its
	// SIGCONT, after the replacement took over — so a periodic check made while the holder is
	// still stopped has its process record alone (seed 74061369: the replacement a kill had just
	// started, stopped by a zombie fault 60 ms after it took term 16, judged at a periodic check
	// 4 s into its 5.3 s pause).
	holderStopped := func(pid int, t0, at time.Time) bool {
		kept := func(from, to time.Time) bool { // to zero: still stopped
			return !from.After(t0.Add(due)) && !from.After(at) && (to.IsZero() || !to.Before(t0))
		}
		if p := ev.Procs[pid]; p != nil {
			for _, s := range p.Stops {
				if kept(s.At, s.Resumed) {
					return true
				}
			}
		}
		for _, w := range ev.Windows {
			if (w.Kind == FaultStop || w.Kind == FaultZombie) && w.PID == pid && kept(w.Start, w.End) {
				return true
			}
		}
		return false
	}
	for i := range ms {
		m := ms[i]
		if !m.Present {
			continue
		}
		present++
		term, which := rowTerm(m), ""
		if m.Term == 0 {
			unnumbered++
			which = fmt.Sprintf(" (a holder no row numbered, after term %d)", term)
		} else if m.Term < maxTerm {
			backwards++
			if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
				r.Add("", "snapshot term went back from %d (seen %s) to %d at %s (publishedAt %s, USDJPY %.3f): an older holder published after a newer one",
					maxTerm, TimeOfDay(maxAt), m.Term, TimeOfDay(m.At), m.PublishedAt, m.Mids["USDJPY"])
				episode = &ms[i]
			}
			continue
		}
		if ok, lt := publishedLive(rows, m, term); !ok && m.PublishedAt != lastZombie {
			zombie++
			lastZombie = m.PublishedAt
			if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
				r.Add("", "snapshot of term %d%s published at %s, when the lease row already had term %d (USDJPY %.3f, read %s): a replaced holder published",
					m.Term, which, m.PublishedAt, lt, m.Mids["USDJPY"], TimeOfDay(m.At))
				episode = &ms[i]
			}
		}
		if m.Term != 0 {
			maxTerm, maxAt = m.Term, m.At
		}
		lt := liveTerm(rows, m.At)
		if lt > term {
			t0, holder := since(lt)
			switch {
			case t0.IsZero() || m.At.Sub(t0) <= due:
			case redisCut(t0, m.At):
				excusedCut++
			case holderStopped(holder, t0, m.At):
				excusedStop++
			default:
				stale++
				if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
					r.Add("", "snapshot still term %d%s at %s, %s after the lease moved to term %d", m.Term, which, TimeOfDay(m.At), m.At.Sub(t0).Round(time.Millisecond), lt)
					episode = &ms[i]
				}
			}
		}
	}
	r.Figures = fmt.Sprintf("%d snapshot samples (%d of term 0), %d went backwards, %d published by a replaced holder, %d behind the live term (and %d while Redis was cut, %d while that term's holder was stopped)", present, unnumbered, backwards, zombie, stale, excusedCut, excusedStop)
	return r
}

// Lease terms only increase.
func checkLeaseTerms(ev *Evidence) Result {
	r := Result{Name: "leaseTerms"}
	rows := sortedRows(ev.Rows)
	var last int64
	var lastAt time.Time
	terms := map[int64]bool{}
	for _, rs := range rows {
		if !rs.OK || rs.Err != "" {
			continue
		}
		terms[rs.Row.Term] = true
		if rs.Row.Term < last {
			r.Add("", "lease row term %d at %s after %d at %s", rs.Row.Term, TimeOfDay(rs.At), last, TimeOfDay(lastAt))
		}
		last, lastAt = rs.Row.Term, rs.At
	}
	r.Figures = fmt.Sprintf("%d row samples, %d terms, last %d", len(rows), len(terms), last)
	return r
}

// Never two processes trusting the lease at once. A sample answered holdsLease at some instant
// of [Sent, Recv] with trustLeftMs left, so it surely trusted over [Recv, Sent+trustLeft] — cut
// short where the soak SIGSTOPped or killed it; two processes whose sure intervals overlap
// trusted at the same instant.
func checkSingleTrust(ev *Evidence) Result {
	r := Result{Name: "singleTrust"}
	type span struct {
		d        DeskSample
		from, to time.Time
	}
	var spans []span
	for _, d := range ev.Desks {
		if d.HoldsLease {
			to := d.Sent.Add(time.Duration(d.TrustLeftMs) * time.Millisecond)
			// A process SIGSTOPped or killed cannot act on the rest of its window.
			if p := ev.Procs[d.PID]; p != nil {
				if h := p.HaltAfter(d.Sent); !h.IsZero() && h.Before(to) {
					to = h
				}
			}
			if to.After(d.Recv) {
				spans = append(spans, span{d, d.Recv, to})
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	reported := map[[2]int]bool{}
	for i := range spans {
		for j := i + 1; j < len(spans) && spans[j].from.Before(spans[i].to); j++ {
			a, b := spans[i], spans[j]
			if a.d.PID == b.d.PID || reported[[2]int{a.d.PID, b.d.PID}] {
				continue
			}
			reported[[2]int{a.d.PID, b.d.PID}] = true
			r.Add("", "%s (term %d, trusted %s–%s) and %s (term %d, trusted %s–%s) trusted the lease at once",
				a.d.Proc, a.d.Term, TimeOfDay(a.from), TimeOfDay(a.to), b.d.Proc, b.d.Term, TimeOfDay(b.from), TimeOfDay(b.to))
		}
	}
	r.Figures = fmt.Sprintf("%d /desk samples, %d holding", len(ev.Desks), len(spans))
	return r
}

// deskPriced are the journal's operations that fill or close at the desk's price.
var deskPriced = map[string]bool{"open": true, "open-retry": true, "close": true, "partialClose": true, "raceClose": true}

// Every fenced write committed inside its term, as far as the client sees it: a fill or a close
// answered 2xx (not a replay) never came from a process already superseded when the request was
// sent — one the lease row had shown replaced by a newer term of another process. A web process
// never claims again after losing, so its terms are the ones the row named it with. (The row is
// sampled every 200 ms; a short legitimate term between two samples is not held against anyone.)
func checkFencedInTerm(ev *Evidence) Result {
	r := Result{Name: "fencedInTerm"}
	rows := sortedRows(ev.Rows)
	maxTerm := map[int]int64{} // pid → the newest term the row named it with
	for _, rs := range rows {
		if rs.OK && rs.Err == "" && rs.Row.Term > maxTerm[rs.Row.PID] {
			maxTerm[rs.Row.PID] = rs.Row.Term
		}
	}
	byName := map[string]*Process{}
	for _, p := range ev.Procs {
		byName[p.Name] = p
	}
	checked := 0
	for _, e := range ev.Journal {
		if !deskPriced[e.Op] || !e.OK() {
			continue
		}
		var b struct {
			Replayed bool `json:"replayed"`
		}
		if e.Decode(&b) && b.Replayed {
			continue
		}
		p := byName[e.Proc]
		if p == nil {
			continue
		}
		checked++
		// The newest row sample at or before the request was sent.
		i := sort.Search(len(rows), func(i int) bool { return rows[i].At.After(e.Start) })
		for i--; i >= 0 && (!rows[i].OK || rows[i].Err != ""); i-- {
		}
		if i < 0 {
			continue
		}
		rs := rows[i]
		if e.ForwardedTerm > 0 {
			// Forwarded: the holder of the term the follower named wrote it, inside that term.
			if rs.Row.Live && rs.Row.Term > e.ForwardedTerm {
				r.Add("", "journal %d: %s answered %d by %s forwarded for term %d at %s–%s, after the lease row named pid %d term %d live at %s",
					e.Seq, e.Op, e.Status, e.Proc, e.ForwardedTerm, TimeOfDay(e.Start), TimeOfDay(e.End), rs.Row.PID, rs.Row.Term, TimeOfDay(rs.At))
			}
			continue
		}
		if rs.Row.PID != p.PID && rs.Row.Live && rs.Row.Term > maxTerm[p.PID] {
			r.Add("", "journal %d: %s answered %d by %s (pid %d, newest term %d) at %s–%s, after the lease row named pid %d term %d live at %s",
				e.Seq, e.Op, e.Status, e.Proc, p.PID, maxTerm[p.PID], TimeOfDay(e.Start), TimeOfDay(e.End), rs.Row.PID, rs.Row.Term, TimeOfDay(rs.At))
		}
	}
	r.Figures = fmt.Sprintf("%d fills and closes answered 2xx checked against the lease row", checked)
	return r
}
