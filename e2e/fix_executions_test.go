package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A trader's partial close the FIX venue fills in three executions is booked once, at the
// order's average price, with every execution recorded as booked for the position; when the
// venue later closes the rest itself, the reconciler's sum of the fills nobody booked adds up
// and it closes the desk position at the venue's price (docs/fix.md, «Fills in several
// executions»). Recording only the last execution left the position open forever.
func TestFIXCloseInSeveralExecutionsThenTheVenuesCloseOfTheRestIsBooked(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2937, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-split-open"), http.StatusCreated, &o)

	v.post("fault", `{"kind":"split","executions":3}`)
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), `{"volume":"0.06"}`, http.StatusOK, &c)
	var booked int
	if err := d.e.sql.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_deal` WHERE `positionId` = ? AND `venueTransactionId` IS NOT NULL) + "+
		"(SELECT COUNT(*) FROM `fx_deal_venue_fill` WHERE `positionId` = ?)", o.Position.ID, o.Position.ID).Scan(&booked); err != nil {
		t.Fatal(err)
	}
	if p := d.e.positionRow(o.Position.ID); p.Status != "OPEN" || !p.Volume.Equal(dec("0.04")) || booked != 3 {
		t.Fatalf("after a close of 0.06 in three executions: %+v with %d executions booked; want 0.04 open and 3 booked", p, booked)
	}

	d.setQuote(tok, "EURUSD", "1.09800", "1.09820")
	v.post("close", `{"symbol":"EURUSD"}`)
	eventually(t, 15*time.Second, 50*time.Millisecond, "the reconciler closed the desk position", func() bool {
		return d.e.positionRow(o.Position.ID).Status == "CLOSED"
	})
	p := d.e.positionRow(o.Position.ID)
	if !p.ClosePrice.Decimal.Equal(dec("1.098")) || p.CloseReason.String != "VENUE" {
		t.Fatalf("the venue's close of the rest booked as %+v; want CLOSED (VENUE) at the bid 1.09800", p)
	}
	if st := v.state(); !st.net("EURUSD").IsZero() || len(st.Orders) != 3 {
		t.Fatalf("venue %+v; want flat after 3 orders (the desk sent nothing more)", st)
	}
	d.checkLedgerBalanced(acct)
}
