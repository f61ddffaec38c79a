package hedger

import (
	"context"
	"testing"

	"fxdesk/internal/hedge"
)

// The hedge book as the hedger reads it, from real rows: every open hedge position counts in
// the symbol's units, only the hedger's are offered to close, closed ones not at all, and a
// SENDING order of any kind holds its symbol.
func TestHedgeBookState(t *testing.T) {
	ctx := context.Background()
	for _, q := range []string{
		"INSERT INTO `fx_hedge_order` (`id`, `symbol`, `units`, `why`, `clientPositionId`, `status`) VALUES " +
			"(901, 'EURUSD', 400000, 'HEDGER', NULL, 'FILLED'), (902, 'EURUSD', 50000, 'RULE', 77, 'FILLED'), " +
			"(903, 'EURUSD', -100000, 'HEDGER', NULL, 'FILLED'), (904, 'GBPUSD', 200000, 'RULE', 78, 'SENDING'), " +
			"(905, 'GBPUSD', 300000, 'HEDGER', NULL, 'NOT_SENT')",
		"INSERT INTO `fx_hedge_position` (`id`, `orderId`, `symbol`, `units`, `venueTradeId`, `clientPositionId`, `status`, `openPrice`, `openedAt`, `plCurrency`) VALUES " +
			"(801, 901, 'EURUSD', 400000, 'T1', NULL, 'OPEN', 1.1, UTC_TIMESTAMP(3), 'USD'), " +
			"(802, 902, 'EURUSD', 50000, 'T2', 77, 'OPEN', 1.1, UTC_TIMESTAMP(3), 'USD'), " +
			"(803, 903, 'EURUSD', -100000, 'T3', NULL, 'CLOSED', 1.1, UTC_TIMESTAMP(3), 'USD')",
	} {
		if _, err := testDB.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		testDB.Exec("DELETE FROM `fx_hedge_position` WHERE `id` IN (801, 802, 803)")
		testDB.Exec("DELETE FROM `fx_hedge_order` WHERE `id` IN (901, 902, 903, 904, 905)")
	})
	b, err := hedge.NewBook(hedge.Config{DB: testDB})
	if err != nil {
		t.Fatal(err)
	}
	got, err := HedgeBook{Book: b}.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eur, gbp := got["EURUSD"], got["GBPUSD"]
	if !eur.Units.Equal(dec("450000")) || len(eur.Positions) != 1 || eur.Positions[0].ID != 801 || !eur.Positions[0].Units.Equal(dec("400000")) || eur.Unresolved != 0 {
		t.Fatalf("EURUSD: %+v; want 450000 units, the hedger's position 801 alone, nothing unresolved", eur)
	}
	if !gbp.Units.IsZero() || len(gbp.Positions) != 0 || gbp.Unresolved != 1 || len(got) != 2 {
		t.Fatalf("GBPUSD: %+v (all %v); want one unresolved order and nothing open", gbp, got)
	}
}
