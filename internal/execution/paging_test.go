package execution_test

import (
	"context"
	"testing"

	"github.com/shopspring/decimal"
)

// The venue closes a desk position in two fills with a gap of 1,500 transaction ids between
// them (a rolled-back batch, an id stride): the reconciler walks the transaction pages past the
// gap, finds both fills and closes the position on the desk. A page that stopped at the empty id
// range after the first fill would never find the second, and the position would stay open.
func TestReconcilerFindsClosingFillsPastAGapOfIDs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const user = 9803
	a := e.externalAccount(user)
	res, err := e.buy(user, a, "0.2")
	if err != nil {
		t.Fatal(err)
	}
	trade := *res.Position.VenueTradeID
	part := decimal.NewFromInt(5000)
	first, err := e.sim.CloseTradeAtVenue(trade, &part)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SkipTransactionIDs(1500); err != nil {
		t.Fatal(err)
	}
	rest, err := e.sim.CloseTradeAtVenue(trade, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gap := rest.TransactionID - first.TransactionID; gap <= 1000 {
		t.Fatalf("the closing fills %d and %d are %d ids apart; the test needs more than a page", first.TransactionID, rest.TransactionID, gap)
	}
	if _, err := e.reconciler(nil).Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := testDB.QueryRow("SELECT `status` FROM `fx_position` WHERE `id` = ?", res.Position.ID).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "CLOSED" {
		t.Fatalf("desk position %d is %s after the venue closed its trade in fills %d and %d; want CLOSED", res.Position.ID, status, first.TransactionID, rest.TransactionID)
	}
	if c := cursor(t, e.sim.AccountID()); c < rest.TransactionID {
		t.Fatalf("cursor %d after the run; want at least the last closing fill %d", c, rest.TransactionID)
	}
}
