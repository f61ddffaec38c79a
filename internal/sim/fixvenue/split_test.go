package fixvenue

import (
	"fmt"
	"testing"
)

// An order split in n executions keeps its units exactly: whole-unit parts, the rest in the
// last, fewer parts when it has fewer whole units than n.
func TestSplitQtyKeepsEveryUnit(t *testing.T) {
	for _, c := range []struct {
		qty  string
		n    int
		want string
	}{
		{"10000", 3, "[3333 3333 3334]"},
		{"6000", 2, "[3000 3000]"},
		{"3", 5, "[1 1 1]"},
		{"0.5", 2, "[0.5]"},
		{"10.5", 2, "[5 5.5]"},
	} {
		if got := fmt.Sprint(splitQty(dec(c.qty), c.n)); got != c.want {
			t.Errorf("splitQty(%s, %d) = %s, want %s", c.qty, c.n, got, c.want)
		}
	}
}

// A split fault's executions are checked when it is injected: bad input changes nothing.
func TestSplitFaultRefusesBadExecutions(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []Fault{{Kind: FaultSplit, Executions: -1}, {Kind: FaultSplit, Executions: maxExecutions + 1}, {Kind: FaultHold, Executions: 2}} {
		if err := s.InjectFault(f); err == nil {
			t.Errorf("fault %+v accepted, want refused", f)
		}
	}
	if len(s.book.faults) != 0 {
		t.Fatalf("refused faults queued: %+v", s.book.faults)
	}
	if err := s.InjectFault(Fault{Kind: FaultSplit}); err != nil || s.book.faults[0].executions() != 2 {
		t.Fatalf("a split fault without executions: %v %+v, want 2 executions", err, s.book.faults)
	}
}
