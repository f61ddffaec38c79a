package invariant

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// leaseFixture is one handover: web1 (pid 100) holds term 1 until the lease row names web2 (pid
// 200) with term 2 at 5 s. The mirror carries term 1, then term 2 a second after the handover.
func leaseFixture() *Evidence {
	web1 := &Process{Name: "web1", PID: 100}
	web2 := &Process{Name: "web2", PID: 200}
	pub := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	ev := &Evidence{
		Procs: map[int]*Process{100: web1, 200: web2},
		Rows: []RowSample{
			{At: at(0), OK: true, Row: LeaseRow{PID: 100, Term: 1, Live: true}},
			{At: at(5), OK: true, Row: LeaseRow{PID: 200, Term: 2, Live: true}},
			{At: at(5.2), Err: "read timed out"},
		},
		Mirrors: []MirrorSample{
			{At: at(1), Present: true, Term: 1, PublishedAt: pub(0.9), Mids: map[string]float64{"USDJPY": 150}},
			{At: at(2), Present: true, Term: 1, PublishedAt: pub(1.9), Mids: map[string]float64{"USDJPY": 150}},
			{At: at(6), Present: true, Term: 2, PublishedAt: pub(5.8), Mids: map[string]float64{"USDJPY": 150}},
			{At: at(6.2)}, // absent for a moment
		},
		Desks: []DeskSample{
			{Proc: "web1", PID: 100, Sent: at(0), Recv: at(0.1), HoldsLease: true, Term: 1, TrustLeftMs: 2000},
			{Proc: "web2", PID: 200, Sent: at(5), Recv: at(5.1), HoldsLease: true, Term: 2, TrustLeftMs: 2000},
			{Proc: "web1", PID: 100, Sent: at(5), Recv: at(5.1), Term: 1, Lost: true},
		},
		Journal: []Entry{
			answer(1, "t1", "open", http.MethodPost, "/api/fx/orders", 201, `{"order":{"id":1}}`, at(1), at(1.1)),
			answer(2, "t1", "close", http.MethodPost, "/api/fx/positions/1/close", 200, `{}`, at(6), at(6.1)),
		},
	}
	ev.Journal[1].Proc = "web2" // the new holder
	return ev
}

func TestMirrorTermCheckFlagsATermGoingBackAZombiesPublishAndASnapshotLeftBehind(t *testing.T) {
	pub := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	runCases(t, leaseFixture, checkMirrorTerm, []checkCase[*Evidence]{
		{"the snapshot's term goes back", func(ev *Evidence) {
			ev.Mirrors = append(ev.Mirrors, MirrorSample{At: at(7), Present: true, Term: 1, PublishedAt: pub(6.9)})
		}, "snapshot term went back from 2"},
		{"a replaced holder publishes", func(ev *Evidence) {
			ev.Mirrors = append(ev.Mirrors, MirrorSample{At: at(5.5), Present: true, Term: 1, PublishedAt: pub(5.4)})
		}, "snapshot of term 1 published at " + pub(5.4) + ", when the lease row already had term 2"},
		{"the snapshot stays on the old term", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
		}, "snapshot still term 1 at 12:00:08.000, 3s after the lease moved to term 2"},
		{"the snapshot stays on the old term while Redis is cut", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultCut, Note: "redis", Start: at(4), End: at(7)}}
		}, ""},
		{"the snapshot stays on the old term while MySQL is cut", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultCut, Note: "mysql", Start: at(4), End: at(7)}}
		}, "snapshot still term 1"},
		{"the snapshot stays on the old term while Redis fails over", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultSentinelFailover, Start: at(4), End: at(7)}}
		}, ""},
		{"the new holder is SIGSTOPped as it takes the lease", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultStop, Note: "web2 stopped and resumed alone", Start: at(5.05), End: at(9), PID: 200}}
		}, ""},
		{"a holder stopped before the lease moved", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultStop, Start: at(1), End: at(4), PID: 100}}
		}, "snapshot still term 1"},
		// The soak's process lane runs late faults back to back: a zombie fault can SIGSTOP the
		// replacement a kill fault has just started, moments after it took the lease.
		{"the new holder is SIGSTOPped as it takes the lease, to be replaced (a zombie fault)", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultZombie, Note: "web2 stopped, replaced, resumed as a zombie", Start: at(5.05), End: at(9), PID: 200}}
		}, ""},
		{"another process is stopped while the new holder owes its snapshot", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Windows = []Window{{Kind: FaultZombie, Note: "web1 stopped, replaced, resumed as a zombie", Start: at(4), End: at(9), PID: 100}}
		}, "snapshot still term 1"},
		// A periodic check made while the fault still plays out has no window for it: the
		// holder's process record says it is stopped.
		{"the new holder is still SIGSTOPped at the check, its fault not yet noted", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Procs[200].Stops = []Stop{{At: at(5.05)}}
		}, ""},
		{"the new holder owed its snapshot before it was stopped", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Procs[200].Stops = []Stop{{At: at(7.6)}}
		}, "snapshot still term 1 at 12:00:08.000"},
		{"the new holder was stopped and resumed before it took the lease", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Procs[200].Stops = []Stop{{At: at(3), Resumed: at(4)}}
		}, "snapshot still term 1 at 12:00:08.000"},
		{"another process is still stopped at the check", func(ev *Evidence) {
			ev.Mirrors[2] = MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(4.9)}
			ev.Procs[100].Stops = []Stop{{At: at(4)}}
		}, "snapshot still term 1"},
	})
}

// redisGrantFixture is a holder that no row numbered: web1 (pid 100) holds term 1 and dies; web2
// (pid 200) starts during a MySQL cut, takes the lease by Redis alone and publishes term-0
// snapshots; once MySQL answers it claims the row at term 2 (row sample at 5.4 s) and publishes
// term 2.
func redisGrantFixture() *Evidence {
	pub := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	return &Evidence{
		Procs: map[int]*Process{100: {Name: "web1", PID: 100}, 200: {Name: "web2", PID: 200}},
		Rows: []RowSample{
			{At: at(0), OK: true, Row: LeaseRow{PID: 100, Term: 1, Live: true}},
			{At: at(3), OK: true, Row: LeaseRow{PID: 100, Term: 1}}, // expired: web1 is gone
			{At: at(5.4), OK: true, Row: LeaseRow{PID: 200, Term: 2, Live: true}},
		},
		Mirrors: []MirrorSample{
			{At: at(1), Present: true, Term: 1, PublishedAt: pub(0.9)},
			{At: at(3.5), Present: true, Term: 0, PublishedAt: pub(3.4)},
			{At: at(4.5), Present: true, Term: 0, PublishedAt: pub(4.4)},
			{At: at(6), Present: true, Term: 2, PublishedAt: pub(5.9)},
		},
		Windows: []Window{{Kind: FaultCut, Note: "mysql", Start: at(2), End: at(5)}},
	}
}

// A Redis-granted holder's term-0 snapshots are not a term going back (the mirror does not fence
// term 0, so cron keeps its prices), but they are held to the row: none is published once the row
// has moved past the term it followed, and none is left behind an interval after.
func TestMirrorTermCheckHoldsTermZeroSnapshotsToTheRow(t *testing.T) {
	pub := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	runCases(t, redisGrantFixture, checkMirrorTerm, []checkCase[*Evidence]{
		{"the Redis-granted holder publishes term 0 after the row moved to another term", func(ev *Evidence) {
			ev.Mirrors[3] = MirrorSample{At: at(6), Present: true, Term: 0, PublishedAt: pub(5.9)}
		}, "snapshot of term 0 (a holder no row numbered, after term 1) published at " + pub(5.9) + ", when the lease row already had term 2"},
		{"a term-0 snapshot left behind after the row moved", func(ev *Evidence) {
			ev.Mirrors[3] = MirrorSample{At: at(8), Present: true, Term: 0, PublishedAt: pub(4.9)}
		}, "snapshot still term 0 (a holder no row numbered, after term 1) at 12:00:08.000, 2.6s after the lease moved to term 2"},
		{"a term-0 snapshot left behind while Redis is cut", func(ev *Evidence) {
			ev.Mirrors[3] = MirrorSample{At: at(8), Present: true, Term: 0, PublishedAt: pub(4.9)}
			ev.Windows = append(ev.Windows, Window{Kind: FaultCut, Note: "redis", Start: at(5), End: at(7)})
		}, ""},
		{"a numbered term still goes back past the term-0 snapshots", func(ev *Evidence) {
			ev.Mirrors = append(ev.Mirrors, MirrorSample{At: at(7), Present: true, Term: 0, PublishedAt: pub(6.9)},
				MirrorSample{At: at(8), Present: true, Term: 1, PublishedAt: pub(7.9)})
		}, "snapshot term went back from 2"},
	})
}

func TestLeaseTermsCheckFlagsATermThatGoesBack(t *testing.T) {
	runCases(t, leaseFixture, checkLeaseTerms, []checkCase[*Evidence]{
		{"the row's term goes back", func(ev *Evidence) {
			ev.Rows = append(ev.Rows, RowSample{At: at(6), OK: true, Row: LeaseRow{PID: 100, Term: 1, Live: true}})
		}, "lease row term 1 at 12:00:06.000 after 2 at 12:00:05.000"},
		{"a failed read between terms", func(ev *Evidence) { ev.Rows[2].Row.Term = 0 }, ""},
	})
}

func TestSingleTrustCheckFlagsTwoProcessesTrustingTheLeaseAtOnce(t *testing.T) {
	runCases(t, leaseFixture, checkSingleTrust, []checkCase[*Evidence]{
		{"the new holder trusts before the old one's window ends", func(ev *Evidence) {
			ev.Desks[1].Sent, ev.Desks[1].Recv = at(1.5), at(1.6)
		}, "web1 (term 1, trusted 12:00:00.100–12:00:02.000) and web2 (term 2, trusted 12:00:01.600–12:00:03.500) trusted the lease at once"},
		{"the old holder was SIGSTOPped before the new one trusted", func(ev *Evidence) {
			ev.Desks[1].Sent, ev.Desks[1].Recv = at(1.5), at(1.6)
			ev.Procs[100].Halts = []time.Time{at(1)}
		}, ""},
		{"the old holder was stopped only after the overlap", func(ev *Evidence) {
			ev.Desks[1].Sent, ev.Desks[1].Recv = at(1.5), at(1.6)
			ev.Procs[100].Halts = []time.Time{at(1.8)}
		}, "trusted the lease at once"},
	})
}

func TestFencedInTermCheckFlagsAFillFromAProcessTheLeaseRowHadReplaced(t *testing.T) {
	runCases(t, leaseFixture, checkFencedInTerm, []checkCase[*Evidence]{
		{"the replaced holder answers a fill", func(ev *Evidence) {
			ev.Journal = append(ev.Journal, answer(3, "t1", "open", http.MethodPost, "/api/fx/orders", 201, `{}`, at(6), at(6.1)))
		}, "journal 3: open answered 201 by web1 (pid 100, newest term 1)"},
		{"the replaced holder answers a replay", func(ev *Evidence) {
			ev.Journal = append(ev.Journal, answer(3, "t1", "open", http.MethodPost, "/api/fx/orders", 200, `{"replayed":true}`, at(6), at(6.1)))
		}, ""},
		{"the replaced holder refuses", func(ev *Evidence) {
			ev.Journal = append(ev.Journal, answer(3, "t1", "open", http.MethodPost, "/api/fx/orders", 503, `{}`, at(6), at(6.1)))
		}, ""},
		{"the replaced holder answers a withdrawal", func(ev *Evidence) {
			ev.Journal = append(ev.Journal, answer(3, "t1", "withdraw", http.MethodPost, "/api/fx/accounts/1/withdraw", 201, `{}`, at(6), at(6.1)))
		}, ""},
		{"a follower forwarded to a replaced term", func(ev *Evidence) {
			e := answer(3, "t1", "partialClose", http.MethodPost, "/api/fx/positions/1/close", 200, `{}`, at(6), at(6.1))
			e.Proc, e.ForwardedTerm = "web2", 1
			ev.Journal = append(ev.Journal, e)
		}, "journal 3: partialClose answered 200 by web2 forwarded for term 1"},
		{"a follower forwarded to the live term", func(ev *Evidence) {
			e := answer(3, "t1", "partialClose", http.MethodPost, "/api/fx/positions/1/close", 200, `{}`, at(6), at(6.1))
			e.Proc, e.ForwardedTerm, e.Resp = "web1", 2, json.RawMessage(`{}`)
			ev.Journal = append(ev.Journal, e)
		}, ""},
	})
}

// zombieAtPeriodicCheckFixture is the pattern of seed 74061369 (times from 19:33:58.0), as a
// periodic check made at 9.5 s read it. The mirror holds term 12 throughout: term 12's holder
// (pid 1012) was stopped by a zombie fault; kills took terms 13 and 14 from their holders within
// 0.2 s each; a stop fault stopped term 15's holder (1015) as it took the lease, and a kill
// ended it; the kill's replacement (1016) took term 16 (the row shows it from 4.784 s) and a
// zombie fault SIGSTOPped it at 4.8 s, before its first snapshot. That fault notes its window only
// at its SIGCONT (10.3 s), after the check: the process record alone says 1016 is stopped.
func zombieAtPeriodicCheckFixture() *Evidence {
	pub := func(sec float64) string { return at(sec).Format(time.RFC3339Nano) }
	ev := &Evidence{Procs: map[int]*Process{}}
	for pid := 1012; pid <= 1016; pid++ {
		ev.Procs[pid] = &Process{Name: fmt.Sprintf("web%d", pid-1000), PID: pid}
	}
	ev.Procs[1015].Stops = []Stop{{At: at(1.08), Resumed: at(4.59)}}
	ev.Procs[1016].Stops = []Stop{{At: at(4.80)}}
	for i := 0; i <= 47; i++ {
		sec := 0.184 + 0.2*float64(i)
		row := LeaseRow{PID: 1012, Term: 12}
		switch {
		case sec >= 4.78:
			row = LeaseRow{PID: 1016, Term: 16, Live: sec < 7.7}
		case sec >= 1.18:
			row = LeaseRow{PID: 1015, Term: 15, Live: sec < 4.1}
		case sec >= 0.98:
			row = LeaseRow{PID: 1014, Term: 14, Live: true}
		case sec >= 0.78:
			row = LeaseRow{PID: 1013, Term: 13, Live: true}
		}
		ev.Rows = append(ev.Rows, RowSample{At: at(sec), OK: true, Row: row})
		ev.Mirrors = append(ev.Mirrors, MirrorSample{At: at(sec), Present: true, Term: 12, PublishedAt: pub(-5.971)})
	}
	ev.Windows = []Window{
		{Kind: FaultZombie, Start: at(-5.19), End: at(0.75), PID: 1012},
		{Kind: "kill", Start: at(0.80), End: at(0.95), PID: 1013},
		{Kind: "kill", Start: at(0.95), End: at(1.07), PID: 1014},
		{Kind: FaultStop, Start: at(1.08), End: at(4.60), PID: 1015},
		{Kind: "kill", Start: at(4.61), End: at(4.73), PID: 1015},
	}
	return ev
}

// A holder a zombie fault stopped moments after it took the lease is excused while the fault
// still plays out — read from its process record, before the fault's window is noted — and no
// longer than it is stopped.
func TestMirrorTermCheckExcusesAHolderStillStoppedAtAPeriodicCheck(t *testing.T) {
	runCases(t, zombieAtPeriodicCheckFixture, checkMirrorTerm, []checkCase[*Evidence]{
		{"no record of the new holder's stop", func(ev *Evidence) {
			ev.Procs[1016].Stops = nil
		}, "snapshot still term 12 at 12:00:07.384, 2.6s after the lease moved to term 16"},
		{"term 15's holder was never stopped", func(ev *Evidence) {
			ev.Procs[1015].Stops = nil
			ev.Windows = ev.Windows[:3]
		}, "after the lease moved to term 15"},
	})
}
