package fix

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/venue"
)

// A reserved close this holder sent whose report has not come keeps RESERVED in the journal (no
// write before the send); reading the trade again from the journal (a resent report's relearn, an
// earlier close asked about) must keep it the trade's pending close, never make it the trade's
// reservation again: the next close would send the same ClOrdID a second time (soak FIX lane,
// seed 134713529712: close 821.c2 sent twice by one holder, the second refused as a duplicate).
func TestASentReservationReadAgainFromTheJournalStaysPending(t *testing.T) {
	lt := newLiveTrades()
	trade := func() *liveTrade {
		return &liveTrade{key: "821", id: 1183, symbol: "EURUSD", units: decimal.NewFromInt(10000), closes: 2,
			reserved: "821.c2", ready: true, inherited: true}
	}
	lt.set([]*liveTrade{trade()}, true)
	lt.mu.Lock()
	lt.byKey["821"].inherited = false // this holder's own reservation
	lt.mu.Unlock()
	none := func(string) bool { return false }
	c, err := lt.claimClose("1183", nil, none, func(string) {}, false)
	if err != nil || c.order.ClOrdID != "821.c2" {
		t.Fatalf("first close: %+v %v; want the reservation 821.c2 sent", c, err)
	}
	// Its outcome unknown (nobody waits any more); the journal still says RESERVED.
	lt.set([]*liveTrade{trade()}, false)
	c, err = lt.claimClose("1183", nil, none, func(string) {}, true)
	var ve *venue.Error
	if c.order.ClOrdID == "821.c2" || !errors.As(err, &ve) || ve.Code != venue.CodeCloseInFlight {
		t.Fatalf("close after the journal was read again: %+v %v; want CLOSE_IN_FLIGHT on 821.c2, never 821.c2 sent again", c, err)
	}
	if c, err := lt.claimClose("1183", nil, none, func(string) {}, false); err != nil || c.ask.ClOrdID != "821.c2" {
		t.Fatalf("a later close: %+v %v; want the venue asked about 821.c2 first", c, err)
	}
}
