package invariant

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// routingFixture is two groups: "abook" (EXTERNAL) keeps EURJPY on the desk, "soak-a"
// (INTERNAL) records its large orders; its orders are each routed correctly.
func routingFixture() *Snapshot {
	min := decimal.NullDecimal{Decimal: decimal.RequireFromString("0.90"), Valid: true}
	return &Snapshot{
		Accounts: []dbAccount{{ID: 1, Group: "abook"}, {ID: 2, Group: "soak-a"}},
		Modes:    map[string]string{"abook": "EXTERNAL", "soak-a": "INTERNAL"},
		Rules: []dbRule{
			{ID: 1, Group: "abook", Action: "B_BOOK", Symbols: sql.NullString{String: `["EURJPY"]`, Valid: true}},
			{ID: 2, Group: "soak-a", Action: "HEDGE", VolumeMin: min},
		},
		Orders: []dbOrder{
			{ID: 10, Account: 1, Symbol: "EURJPY", Volume: decimal.RequireFromString("0.5"), Execution: "INTERNAL", RouteRule: nid(1)},
			{ID: 11, Account: 1, Symbol: "EURUSD", Volume: decimal.RequireFromString("0.5"), Execution: "EXTERNAL"},
			{ID: 12, Account: 2, Symbol: "EURUSD", Volume: decimal.RequireFromString("0.95"), Execution: "INTERNAL", RouteRule: nid(2)},
			{ID: 13, Account: 2, Symbol: "EURUSD", Volume: decimal.RequireFromString("0.89"), Execution: "INTERNAL"},
		},
	}
}

func TestRoutingHoldsForCorrectlyRoutedOrders(t *testing.T) {
	if r := checkRouting(routingFixture()); len(r.Violations) > 0 {
		t.Fatalf("violations on a correct fixture: %v", r.Violations)
	}
}

func TestRoutingFindsEachMisroute(t *testing.T) {
	for _, tt := range []struct {
		name   string
		mutate func(s *Snapshot)
		want   string
	}{
		{"a rule's order executes elsewhere", func(s *Snapshot) { s.Orders[0].Execution = "EXTERNAL" }, "order 10 was routed by rule 1"},
		{"an order names a rule it does not meet", func(s *Snapshot) { s.Orders[2].Volume = decimal.RequireFromString("0.5") }, "order 12 (EURUSD 0.5 lots) names rule 2"},
		{"a matching order names no rule", func(s *Snapshot) { s.Orders[0].RouteRule = sql.NullInt64{} }, "order 10 (EURJPY 0.5 lots, account 1) names no rule, but rule 1"},
		{"a default order leaves its group's mode", func(s *Snapshot) { s.Orders[1].Execution = "INTERNAL" }, "order 11 names no rule and executes INTERNAL"},
		{"an earlier rule matched", func(s *Snapshot) {
			s.Rules = append([]dbRule{{ID: 3, Group: "soak-a", Action: "A_BOOK"}}, s.Rules...)
		}, "order 12 names rule 2, but rule 3 is asked first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := routingFixture()
			tt.mutate(s)
			r := checkRouting(s)
			for _, v := range r.Violations {
				if strings.Contains(v.Text, tt.want) {
					return
				}
			}
			t.Fatalf("want a violation with %q, got %v", tt.want, r.Violations)
		})
	}
}
