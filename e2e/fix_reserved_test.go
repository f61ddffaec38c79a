package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The holder is killed after the stop's reserved close went to the venue and before it wrote
// anything (the venue filled it and holds its report; the journal row is still RESERVED). The
// new holder inherits the reservation (the library resends the old holder's message with
// PossDupFlag=Y, which the venue executes once); the report, released, is the close — booked
// once; the venue holds that one close, never a second (docs/fix.md, «Reserved closes»).
func TestFIXHolderKilledAfterReservedCloseSentClosesOnce(t *testing.T) {
	t.Parallel()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2830, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.50","sl":"1.09500","requestNonce":"fix-reserved"}`, acct)
	if a := send(d.web, tok, "POST", "/api/fx/orders", body); a.err != nil || a.code != http.StatusCreated {
		t.Fatalf("open with a stop = %d %s (%v)", a.code, a.body, a.err)
	}
	var id int64
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&id); err != nil {
		t.Fatal(err)
	}
	cid := strconv.FormatInt(id, 10)
	reserved := cid + ".c1"
	rowStatus := func() string {
		var st string
		_ = d.e.sql.QueryRow("SELECT `status` FROM `fx_fix_order` WHERE `clOrdId` = ?", reserved).Scan(&st)
		return st
	}
	eventually(t, 10*time.Second, 10*time.Millisecond, "the stop's close reserved", func() bool { return rowStatus() == "RESERVED" })

	v.post("fault", `{"kind":"hold"}`)
	d.simQuote("EURUSD", "1.09400", "1.09420")
	eventually(t, 15*time.Second, 10*time.Millisecond, "the venue filled the reserved close and holds its report", func() bool {
		st := v.state()
		return len(st.Held) == 1 && len(st.ordersOf(reserved)) == 1 && st.ordersOf(reserved)[0].Status == "2"
	})
	if st := rowStatus(); st != "RESERVED" {
		t.Fatalf("the reserved close's row is %s while its report is held; the send must need no write", st)
	}
	d.web.stop(syscall.SIGKILL)

	web := d.e.start("web-2", "fxdesk-web", d.env...)
	d.web = web
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	v.post("release", `{}`)
	eventually(t, 30*time.Second, 50*time.Millisecond, "the position booked closed", func() bool {
		ps := d.e.positionsOfOrder(id)
		return len(ps) == 1 && ps[0].Status == "CLOSED"
	})
	web.reconciledAgain(10 * time.Second)
	st := v.state()
	var closes []string
	for _, o := range st.Orders {
		if strings.HasPrefix(o.ClOrdID, cid+".c") {
			closes = append(closes, o.ClOrdID)
		}
	}
	if len(closes) != 1 || closes[0] != reserved || !st.net("EURUSD").IsZero() {
		t.Fatalf("venue closes %v, net %s; want only %s and a flat venue", closes, st.net("EURUSD"), reserved)
	}
	if s := rowStatus(); s != "FILLED" {
		t.Fatalf("the reserved close's row is %s, want FILLED from its report", s)
	}
	d.checkLedgerBalanced(acct)
}
