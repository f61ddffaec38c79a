package invariant

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

func nd(s string) decimal.NullDecimal {
	if s == "" {
		return decimal.NullDecimal{}
	}
	return decimal.NullDecimal{Decimal: decimal.RequireFromString(s), Valid: true}
}

// policySnapshot is a snapshot of one MARKET order o and, when opened is not "", the position
// it opened (volume opened, at its fill price).
func policySnapshot(o dbPolicy, opened string) *Snapshot {
	s := &Snapshot{Policies: []dbPolicy{o}}
	if opened != "" {
		s.Positions = []dbPosition{{ID: 1, Order: o.ID, OpenVolume: decimal.RequireFromString(opened), Volume: decimal.RequireFromString(opened), OpenPrice: o.FillPrice.Decimal}}
	}
	return s
}

// Each check passes a sound order and fails its planted violation, naming the order.
func TestOrderBoundChecksCatchPlantedViolations(t *testing.T) {
	t.Parallel()
	vol := decimal.RequireFromString("0.15")
	for _, c := range []struct {
		name   string
		check  func(*Snapshot, *Evidence) Result
		o      dbPolicy
		opened string
		want   string // a fragment of the violation; "" for none
	}{
		{"a buy filled at its bound", checkBoundHonoured, dbPolicy{ID: 7, Side: "BUY", TimeInForce: "GTC", Status: "FILLED", Volume: vol, PriceBound: nd("1.10020"), FillPrice: nd("1.10020")}, "0.15", ""},
		{"a buy filled above its bound", checkBoundHonoured, dbPolicy{ID: 7, Side: "BUY", TimeInForce: "GTC", Status: "FILLED", Volume: vol, PriceBound: nd("1.10020"), FillPrice: nd("1.10021")}, "0.15", "past its bound"},
		{"a sell filled below its bound", checkBoundHonoured, dbPolicy{ID: 7, Side: "SELL", TimeInForce: "IOC", Status: "FILLED", Volume: vol, PriceBound: nd("1.10000"), FillPrice: nd("1.09990")}, "0.15", "past its bound"},
		{"a refused bound", checkBoundHonoured, dbPolicy{ID: 7, Side: "SELL", TimeInForce: "FOK", Status: "REJECTED", Volume: vol, PriceBound: nd("1.10000")}, "", ""},
		{"a FOK filled whole", checkFOKWhole, dbPolicy{ID: 8, Side: "BUY", TimeInForce: "FOK", Status: "FILLED", Volume: vol, FillPrice: nd("1.1")}, "0.15", ""},
		{"a FOK partly booked", checkFOKWhole, dbPolicy{ID: 8, Side: "BUY", TimeInForce: "FOK", Status: "FILLED", Volume: vol, FillPrice: nd("1.1"), FilledVolume: nd("0.09")}, "0.09", "FOK order 8"},
		{"a FOK whose position is a part", checkFOKWhole, dbPolicy{ID: 8, Side: "BUY", TimeInForce: "FOK", Status: "FILLED", Volume: vol, FillPrice: nd("1.1")}, "0.09", "opened a position of 0.09"},
		{"an IOC's part booked", checkIOCPart, dbPolicy{ID: 9, Side: "SELL", TimeInForce: "IOC", Status: "FILLED", Volume: vol, FillPrice: nd("1.1"), FilledVolume: nd("0.09")}, "0.09", ""},
		{"an IOC booked whole for a part", checkIOCPart, dbPolicy{ID: 9, Side: "SELL", TimeInForce: "IOC", Status: "FILLED", Volume: vol, FillPrice: nd("1.1"), FilledVolume: nd("0.09")}, "0.15", "IOC order 9 opened"},
		{"an IOC part that is all of it", checkIOCPart, dbPolicy{ID: 9, Side: "SELL", TimeInForce: "IOC", Status: "FILLED", Volume: vol, FillPrice: nd("1.1"), FilledVolume: nd("0.15")}, "0.15", "filledVolume 0.15 of 0.15"},
	} {
		r := c.check(policySnapshot(c.o, c.opened), &Evidence{})
		var got []string
		for _, v := range r.Violations {
			got = append(got, v.Text)
		}
		switch {
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: violations %q, want none", c.name, got)
		case c.want != "" && !strings.Contains(strings.Join(got, "\n"), c.want):
			t.Errorf("%s: violations %q, want one containing %q", c.name, got, c.want)
		}
	}
}
