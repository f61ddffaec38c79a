package fix

import "testing"

// Intent: a report is the desk order's the journal holds under its ClOrdID — an open, a close
// ("<trade>.c<n>"), a hedge-book order ("H<id>", docs/routing.md «Hedge book») — unless it
// contradicts that order; then, and for a row the venue's own order wrote, it is the venue's.
// The ClOrdID's shape decides nothing: a venue's numeric ClOrdID equal to a desk order id is told
// apart by its OrderID, symbol or side.
func TestWhoseExecution(t *testing.T) {
	t.Parallel()
	desk := order{ClOrdID: "42", TradeID: "42", Symbol: "EURUSD", Side: sideBuy, VenueOrderID: "V-1"}
	unacked := order{ClOrdID: "H12.c1", TradeID: "H12", Symbol: "EURUSD", Side: sideSell}
	venueRow := order{ClOrdID: "venue:V-9", TradeID: "", Symbol: "EURUSD", Side: sideSell, VenueOrderID: "V-9"}
	for _, c := range []struct {
		name string
		row  order
		r    report
		ours bool
	}{
		{"the desk order's own report", desk, report{ClOrdID: "42", OrderID: "V-1", Symbol: "EURUSD", Side: sideBuy}, true},
		{"a report without OrderID, symbol or side contradicts nothing", desk, report{ClOrdID: "42"}, true},
		{"a hedge close before its first report", unacked, report{ClOrdID: "H12.c1", OrderID: "V-5", Symbol: "EURUSD", Side: sideSell}, true},
		{"the venue's order numbered as a desk order: another OrderID", desk, report{ClOrdID: "42", OrderID: "V-2", Symbol: "EURUSD", Side: sideBuy}, false},
		{"the venue's close numbered as a desk order: the other side", desk, report{ClOrdID: "42", OrderID: "V-1", Symbol: "EURUSD", Side: sideSell}, false},
		{"another symbol", unacked, report{ClOrdID: "H12.c1", Symbol: "USDJPY", Side: sideSell}, false},
		{"a row the venue's own order wrote", venueRow, report{ClOrdID: "venue:V-9", OrderID: "V-9", Symbol: "EURUSD", Side: sideSell}, false},
	} {
		if got := ours(c.row, c.r); got != c.ours {
			t.Errorf("%s: ours = %v, want %v", c.name, got, c.ours)
		}
	}
	if k := venueKey(report{OrderID: "V-9"}); k != "venue:V-9" {
		t.Errorf("venueKey = %q", k)
	}
}
