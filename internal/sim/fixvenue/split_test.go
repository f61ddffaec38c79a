package fixvenue

import (
	"fmt"
	"testing"

	"github.com/shopspring/decimal"
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

// fixedQuote quotes every symbol at one bid and ask.
type fixedQuote struct{ bid, ask string }

func (q fixedQuote) Quote(string) (decimal.Decimal, decimal.Decimal, bool) {
	return dec(q.bid), dec(q.ask), true
}

// With Config.Executions the venue fills every unfaulted order in that many executions, and
// /control/state lists each (ExecID, qty, price), adding up to the order's CumQty; a faulted
// order follows its fault (here: one execution of a partial IOC fill).
func TestStandingExecutionsListedPerOrder(t *testing.T) {
	s, err := New(Config{Executions: 3, Prices: fixedQuote{"1.1000", "1.1002"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.book.order("7", "EURUSD", sideBuy, dec("10000"), "", 1, false)
	o := s.State().Orders[0]
	if o.Status != statusFilled || len(o.Executions) != 3 {
		t.Fatalf("order 7: status %s, executions %+v, want filled in 3", o.Status, o.Executions)
	}
	var sum decimal.Decimal
	ids := map[string]bool{}
	for _, e := range o.Executions {
		sum = sum.Add(e.Qty)
		ids[e.ExecID] = true
		if !e.Px.Equal(dec("1.1002")) {
			t.Errorf("execution %+v of a buy not at the ask", e)
		}
	}
	if !sum.Equal(o.CumQty) || len(ids) != 3 || o.ExecID != o.Executions[2].ExecID {
		t.Fatalf("executions %+v add up to %s (CumQty %s), ExecID %s", o.Executions, sum, o.CumQty, o.ExecID)
	}
	units := dec("12345")
	if err := s.InjectFault(Fault{Kind: FaultPartial, Units: &units}); err != nil {
		t.Fatal(err)
	}
	s.book.order("8", "EURUSD", sideSell, dec("20000"), "3", 2, false)
	if o, _ := s.book.status("8"); len(o.Executions) != 1 || !o.CumQty.Equal(units) {
		t.Fatalf("a partial IOC order under Executions=3: %+v, want one execution of 12345", o)
	}
	if _, err := New(Config{Executions: maxExecutions + 1}, nil); err == nil {
		t.Fatal("Executions above the bound accepted")
	}
}
