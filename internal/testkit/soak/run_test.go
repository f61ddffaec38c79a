package soak

import (
	"strings"
	"testing"

	"fxdesk/internal/testkit/soak/invariant"
)

func TestTallyKeepsOneRowPerViolationKeyWithItsLatestText(t *testing.T) {
	tl := newTally()
	first := invariant.Result{Name: "no5xx", Figures: "1 request"}
	first.Add("5xx from 7", "1 answers 500")
	tl.add([]invariant.Result{first, {Name: "ledger", Figures: "1 account"}})
	later := invariant.Result{Name: "no5xx", Figures: "2 requests"}
	later.Add("5xx from 7", "2 answers 500")
	later.Add("", "another row")
	tl.add([]invariant.Result{later})
	if tl.checks != 2 || tl.violations() != 2 || tl.figures["no5xx"] != "2 requests" {
		t.Fatalf("checks %d, violations %d, figures %q; want 2, 2, the latest", tl.checks, tl.violations(), tl.figures["no5xx"])
	}
	if got := tl.broken["no5xx"]; got[0] != "2 answers 500" || got[1] != "another row" {
		t.Fatalf("rows %q: the episode's row must carry its latest text, the new row follow it", got)
	}
	if strings.Join(tl.order, ",") != "no5xx,ledger" {
		t.Fatalf("order %v: invariants are reported in the order first seen", tl.order)
	}
}
