package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// reservedKill is a desk whose holder was SIGKILLed after the stop's reserved close went to the
// venue and before it wrote anything: the venue filled the close and holds its report; the
// journal row is still RESERVED.
type reservedKill struct {
	d        *fixDesk
	acct, id int64  // the trader's account and the opening order
	cid      string // the opening ClOrdID
	reserved string // the reserved close's ClOrdID, <cid>.c1
}

// killAfterReservedCloseSent opens 0.5 lots EURUSD with a stop, waits for its reserved close,
// holds the venue's next report, moves the price through the stop and SIGKILLs the holder once
// the venue filled the close.
func killAfterReservedCloseSent(t *testing.T) *reservedKill {
	t.Helper()
	d := newFIXDesk(t)
	v := d.venue
	tok, acct := d.externalTrader(2830, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.50","sl":"1.09500","requestNonce":"fix-reserved"}`, acct)
	if a := send(d.web, tok, "POST", "/api/fx/orders", body); a.err != nil || a.code != http.StatusCreated {
		t.Fatalf("open with a stop = %d %s (%v)", a.code, a.body, a.err)
	}
	k := &reservedKill{d: d, acct: acct}
	if err := d.e.sql.QueryRow("SELECT `id` FROM `fx_order` WHERE `accountId` = ?", acct).Scan(&k.id); err != nil {
		t.Fatal(err)
	}
	k.cid = strconv.FormatInt(k.id, 10)
	k.reserved = k.cid + ".c1"
	eventually(t, 10*time.Second, 10*time.Millisecond, "the stop's close reserved", func() bool { return k.rowStatus() == "RESERVED" })

	v.post("fault", `{"kind":"hold"}`)
	d.simQuote("EURUSD", "1.09400", "1.09420")
	eventually(t, 15*time.Second, 10*time.Millisecond, "the venue filled the reserved close and holds its report", func() bool {
		st := v.state()
		return len(st.Held) == 1 && len(st.ordersOf(k.reserved)) == 1 && st.ordersOf(k.reserved)[0].Status == "2"
	})
	if st := k.rowStatus(); st != "RESERVED" {
		t.Fatalf("the reserved close's row is %s while its report is held; the send must need no write", st)
	}
	d.web.stop(syscall.SIGKILL)
	return k
}

func (k *reservedKill) rowStatus() string {
	var st string
	_ = k.d.e.sql.QueryRow("SELECT `status` FROM `fx_fix_order` WHERE `clOrdId` = ?", k.reserved).Scan(&st)
	return st
}

// startNewHolder starts the next holder and waits until its session logged on.
func (k *reservedKill) startNewHolder() *proc {
	web := k.d.e.start("web-2", "fxdesk-web", k.d.env...)
	k.d.web = web
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	web.waitLog(15*time.Second, msgIs("FIX session logged on"))
	return web
}

// wantClosedOnce asserts the end state: the venue holds one close of the trade, the reserved
// ClOrdID, carried by sends messages (the old holder's, and the new holder's refused as a
// duplicate), and a flat net; the desk position CLOSED with one close deal at the venue's fill
// price; the row FILLED; the ledger balanced.
func (k *reservedKill) wantClosedOnce(t *testing.T, sends int) {
	t.Helper()
	d := k.d
	eventually(t, 30*time.Second, 50*time.Millisecond, "the position booked closed", func() bool {
		ps := d.e.positionsOfOrder(k.id)
		return len(ps) == 1 && ps[0].Status == "CLOSED"
	})
	d.web.reconciledAgain(10 * time.Second)
	st := d.venue.state()
	var closes []fixOrder
	for _, o := range st.Orders {
		if strings.HasPrefix(o.ClOrdID, k.cid+".c") {
			closes = append(closes, o)
		}
	}
	if len(closes) != 1 || closes[0].ClOrdID != k.reserved || closes[0].Status != "2" || !st.net("EURUSD").IsZero() {
		t.Fatalf("venue closes %+v, net %s; want only %s, filled, and a flat venue", closes, st.net("EURUSD"), k.reserved)
	}
	if len(closes[0].SeqNums) != sends {
		t.Fatalf("the venue got %s in messages %v; want %d send(s)", k.reserved, closes[0].SeqNums, sends)
	}
	if s := k.rowStatus(); s != "FILLED" {
		t.Fatalf("the reserved close's row is %s, want FILLED", s)
	}
	ps := d.e.positionsOfOrder(k.id)
	var deals int
	var price decimal.NullDecimal
	if err := d.e.sql.QueryRow("SELECT COUNT(*), MAX(`price`) FROM `fx_deal` WHERE `positionId` = ? AND `type` = 'PROFIT'", ps[0].ID).Scan(&deals, &price); err != nil {
		t.Fatal(err)
	}
	if deals != 1 || !price.Valid || !price.Decimal.Equal(closes[0].AvgPx) || !ps[0].ClosePrice.Decimal.Equal(closes[0].AvgPx) {
		t.Fatalf("%d close deals at %v, position closed at %v; want one at the venue's %s", deals, price, ps[0].ClosePrice, closes[0].AvgPx)
	}
	d.checkLedgerBalanced(k.acct)
}

// The holder is killed after the stop's reserved close went to the venue and before it wrote
// anything. The new holder inherits the reservation; the report, released, is the close —
// booked once; the venue holds that one close, never a second (docs/fix.md, «Reserved closes»).
func TestFIXHolderKilledAfterReservedCloseSentClosesOnce(t *testing.T) {
	t.Parallel()
	k := killAfterReservedCloseSent(t)
	k.startNewHolder()
	k.d.venue.post("release", `{}`)
	k.wantClosedOnce(t, 1)
}

// The same kill, and the venue keeps the report held for good (lost, or slow): the new holder
// gets no report and no tick past the stop. Its reconciler asks the venue about the inherited
// reservation (an earlier holder may have sent it) and adopts the earlier send — the position
// closed once, at the venue's price, with nothing sent again.
func TestFIXNewHolderAdoptsAHeldReservedClose(t *testing.T) {
	t.Parallel()
	k := killAfterReservedCloseSent(t)
	k.startNewHolder()
	k.wantClosedOnce(t, 1)
	if held := k.d.venue.state().Held; len(held) != 1 || held[0] != k.reserved {
		t.Fatalf("the venue holds %v; the close must be adopted while its report is held", held)
	}
}

// The same kill, the report held, and a tick past the stop reaches the new holder before any
// status answer (the venue ignores the first queries): the new holder closes on its own, with
// the inherited ClOrdID; the venue refuses it as a duplicate order (OrdRejReason 6) and the desk
// reads that as "the earlier send is the close" — one close at the venue, the position closed
// once at its price.
func TestFIXNewHolderResendsAHeldReservedCloseAsADuplicate(t *testing.T) {
	t.Parallel()
	k := killAfterReservedCloseSent(t)
	k.d.venue.post("fault", `{"kind":"ignore","count":3}`)
	web := k.startNewHolder()
	// After the logon's gap fill: a send crossing the venue's ResendRequest is resent with
	// PossDupFlag=Y, which the venue answers with the order's status, not a refusal.
	web.waitLog(10*time.Second, func(l logLine) bool {
		ev, _ := l["event"].(string)
		return strings.HasPrefix(ev, "Sent SequenceReset")
	})
	k.d.simQuote("EURUSD", "1.09300", "1.09320")
	k.wantClosedOnce(t, 2)
	if _, ok := web.findLog(msgIs("FIX: the venue refused a close's ClOrdID as a duplicate; its earlier send is the close")); !ok {
		t.Fatal("the desk never read the venue's duplicate-order refusal as the earlier send")
	}
	if !k.d.venue.logHas("duplicate ClOrdID without PossDupFlag; refused") {
		t.Fatal("the venue never refused the repeated ClOrdID as a duplicate")
	}
	if held := k.d.venue.state().Held; len(held) != 1 {
		t.Fatalf("the venue holds %v; the close must be adopted while its report is held", held)
	}
}
