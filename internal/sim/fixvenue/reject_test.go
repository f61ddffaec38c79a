package fixvenue

import (
	"testing"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// newOrderSingle is a NewOrderSingle as the desk's session hands it to the venue.
func newOrderSingle(clOrdID, symbol, ordType string, seq int) *quickfix.Message {
	m := quickfix.NewMessage()
	m.Header.SetString(tag.MsgType, msgNewOrderSingle)
	m.Header.SetInt(tag.MsgSeqNum, seq)
	m.Body.SetString(tag.ClOrdID, clOrdID)
	m.Body.SetString(tag.Symbol, symbol)
	m.Body.SetString(tag.Side, sideBuy)
	m.Body.SetString(tag.OrdType, ordType)
	m.Body.SetString(tag.OrderQty, "1000")
	return m
}

// The venue's reject reasons are FIX 4.4's: a six-letter symbol it does not list is an unknown
// symbol (OrdRejReason 1), not a closed exchange (2) — that stays for a listed symbol without a
// price now — and a report echoes the OrdType the order carried.
func TestRejectReasonsAndOrdTypeAreFIXs(t *testing.T) {
	s, err := New(Config{Prices: nil}, nil) // no prices: a listed symbol is closed
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, clOrdID, symbol, ordType string
		reason                         int
	}{
		{"an unlisted six-letter symbol", "1", "ABCXYZ", ordMarket, RejectUnknownSymbol},
		{"a listed symbol with no price", "2", "EURUSD", ordMarket, RejectMarketClosed},
		{"a stop order", "3", "EURUSD", "3", RejectUnsupported},
		{"a limit order without a price", "4", "EURUSD", ordLimit, RejectBroker},
	} {
		if rej := s.FromApp(newOrderSingle(c.clOrdID, c.symbol, c.ordType, 10), s.sessionID); rej != nil {
			t.Fatalf("%s: refused as a message: %v", c.name, rej)
		}
		o, ok := s.book.status(c.clOrdID)
		if !ok || o.Status != statusRejected || o.RejectReason != c.reason {
			t.Errorf("%s: order %+v (found %v), want rejected with OrdRejReason %d", c.name, o, ok, c.reason)
			continue
		}
		for _, execType := range []string{execRejected, execStatus} {
			if got, _ := s.report(o, execType).Body.GetString(tag.OrdType); got != c.ordType {
				t.Errorf("%s: report ExecType=%s echoes OrdType %q, want %q as received", c.name, execType, got, c.ordType)
			}
		}
	}
}
