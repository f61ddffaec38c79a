package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// An order the FIX venue refuses as a message — a session-level Reject (35=3) of its
// NewOrderSingle, or a BusinessMessageReject (35=j) naming its ClOrdID — is a refusal the trader
// hears at once, with the LP's words: 409, the order REJECTED with the venue's reason, the FIX
// journal's order REJECTED with it — never 504 after the venue timeout, an order left SENDING
// and a reconciler asking the venue about it until it marks it NOT_SENT.
func TestFIXOrderRefusedAsAMessageIsRejectedAtOnce(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t, "FXDESK_VENUE_TIMEOUT=5s")
	v := d.venue
	tok, acct := d.externalTrader(2947, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	for i, c := range []struct{ kind, text string }{
		{"session-reject", "Value is incorrect (out of range) for this tag"},
		{"business-reject", "Unsupported security for this account"},
	} {
		v.post("fault", fmt.Sprintf(`{"kind":%q,"reason":5,"text":%q}`, c.kind, c.text))
		a := send(d.web, tok, "POST", "/api/fx/orders", marketOrder(acct, "BUY", "0.10", "fix-refused-"+strconv.Itoa(i)))
		if a.err != nil || a.code != http.StatusConflict || !strings.Contains(string(a.body), c.text) {
			t.Fatalf("%s: order = %d %s (%v); want 409 with the venue's text %q", c.kind, a.code, a.body, a.err, c.text)
		}
		var id int64
		if err := d.e.sql.QueryRow("SELECT MAX(`id`) FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if o := d.e.orderRow(id); o.Status != "REJECTED" || !strings.Contains(o.VenueReason.String, c.text) {
			t.Fatalf("%s: order %d %+v; want REJECTED with the venue's reason", c.kind, id, o)
		}
		var status, text string
		if err := d.e.sql.QueryRow("SELECT `status`, COALESCE(`text`, '') FROM `fx_fix_order` WHERE `clOrdId` = ?", strconv.FormatInt(id, 10)).Scan(&status, &text); err != nil {
			t.Fatal(err)
		}
		if status != "REJECTED" || !strings.Contains(text, c.text) {
			t.Fatalf("%s: FIX journal order %d %s %q; want REJECTED with the venue's text", c.kind, id, status, text)
		}
	}
	// Nothing is left for the reconciler to ask the venue about.
	d.web.reconciledAgain(10 * time.Second)
	d.web.reconciledAgain(10 * time.Second)
	type queries struct {
		Queries struct {
			OrderStatus int `json:"orderStatus"`
		} `json:"queries"`
		Orders []fixOrder `json:"orders"`
	}
	if st := controlState[queries](t, v.control, "fixvenue"); st.Queries.OrderStatus != 0 || len(st.Orders) != 0 {
		t.Fatalf("after the refusals the desk asked %d status requests and the venue holds %+v; want none", st.Queries.OrderStatus, st.Orders)
	}
	d.checkLedgerBalanced(acct)
}
