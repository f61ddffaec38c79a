package fix

import "testing"

// Intent: a hedge-book order's ClOrdID ("H<id>", docs/routing.md «Hedge book») keys its trade
// like any other, and its closes ("H<id>.c<n>") name that trade.
func TestTradeOfHedgeClOrdID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"H12": "H12", "H12.c1": "H12", "H12.c10": "H12", "12.c1": "12", "VENUE-3": ""} {
		if got := tradeOf(in); got != want {
			t.Errorf("tradeOf(%q) = %q, want %q", in, got, want)
		}
	}
}
