package invariant

import (
	"strings"
	"testing"
	"time"
)

// A page whose lots are within the shared reading's bound passes; one older than the bound, one
// read after the page answered and one whose time does not parse each fail, named.
func TestStatusPageBookCatchesOldLots(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	page := func(proc string, lots *time.Time) PageSample {
		return PageSample{Proc: proc, Sent: t0, Recv: t0.Add(40 * time.Millisecond), Code: 200, LotsReadAt: lots}
	}
	sound := []PageSample{page("fresh", at(-10*time.Millisecond)), page("stale-but-bounded", at(-PageLotsStale)), page("no-lots", nil)}
	if r := checkStatusPageBook(&Evidence{Pages: sound}); len(r.Violations) != 0 {
		t.Fatalf("sound pages: %v", r.Violations)
	}
	bad := append(sound, page("too-old", at(-PageLotsStale-time.Second)), page("from-the-future", at(time.Second)),
		PageSample{Proc: "garbled", Sent: t0, Recv: t0, Code: 200, Unparsed: "yesterday"})
	// Lots read just before the soak SIGSTOPped the process are older by the pause: not judged;
	// the same age on another process, not stopped, still fails.
	stopped := PageSample{Proc: "stopped", PID: 7, Sent: t0, Recv: t0.Add(2 * time.Second), Code: 200, LotsReadAt: at(-4 * time.Second)}
	procs := map[int]*Process{7: {Name: "stopped", PID: 7, Halts: []time.Time{t0.Add(-3990 * time.Millisecond)}}}
	if r := checkStatusPageBook(&Evidence{Pages: append(sound, stopped), Procs: procs}); len(r.Violations) != 0 {
		t.Fatalf("a page across a stop of its process: %v", r.Violations)
	}
	r := checkStatusPageBook(&Evidence{Pages: bad, Procs: procs})
	if len(r.Violations) != 3 {
		t.Fatalf("want 3 violations, got %d: %v", len(r.Violations), r.Violations)
	}
	for i, want := range []string{"too-old", "from-the-future", "garbled"} {
		if !strings.HasPrefix(r.Violations[i].Text, want+" ") {
			t.Errorf("violation %d = %q, want it to name %s", i, r.Violations[i].Text, want)
		}
	}
}
