package fix

import (
	"strings"
	"testing"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// Whatever values an execution report's fields carry — numbers that are not numbers, a status
// the desk does not know, a reason that is not an integer, a time that is not one — reading it
// never panics and what it reads stays within what the desk handles: a report without a
// ClOrdID is journaled under a key of the desk's making, and a quantity that does not parse reads as zero, never as a fill.
// (The messages are built field by field: the library's framing and parsing are its own.)
func FuzzParseReport(f *testing.F) {
	f.Add("E1", "F", "2", "42", "EURUSD", "1", "1000", "1000", "1.1002", "", "20260101-00:00:00.000")
	f.Add("X", "I", "8", "7", "", "", "abc", "", "", "5", "")
	f.Add("", "", "", "VENUE-1.c2", "", "2", "-5", "1e400", "NaN", "x", "notatime")
	f.Fuzz(func(t *testing.T, execID, execType, ordStatus, clOrdID, symbol, side, qty, cum, px, rej, at string) {
		msg := quickfix.NewMessage()
		msg.Header.SetString(tag.MsgType, msgExecutionReport)
		set := func(tg quickfix.Tag, v string) {
			if v != "" {
				msg.Body.SetString(tg, v)
			}
		}
		set(tag.ExecID, execID)
		set(tag.ExecType, execType)
		set(tag.OrdStatus, ordStatus)
		set(tag.ClOrdID, clOrdID)
		set(tag.Symbol, symbol)
		set(tag.Side, side)
		set(tag.OrderQty, qty)
		set(tag.CumQty, cum)
		set(tag.AvgPx, px)
		set(tag.OrdRejReason, rej)
		set(tag.TransactTime, at)
		r := parseReport(msg)
		_ = terminal(r)
		_ = unknownOrder(r)
		_ = cancelReason(r.RejectReason, r.Text)
		_ = signed(r.Side, r.CumQty)
		if k := venueKey(r); !strings.HasPrefix(k, venueKeyPrefix) || len(k) > 64 {
			t.Fatalf("the venue's own order %q is journaled as %q: not a key of the desk's making", r.OrderID, k)
		}
		if cum != "" && r.CumQty.String() != "0" && r.CumQty.String() != cum {
			if _, err := decimalOf(cum); err != nil {
				t.Fatalf("CumQty %q that does not parse read as %s", cum, r.CumQty)
			}
		}
	})
}

// Whatever bytes a stored message holds, reading it (the store's check before a resend) answers
// an error instead of panicking: QuickFIX/Go v0.9.10's parser panics on some truncated messages.
func FuzzParseStored(f *testing.F) {
	f.Add([]byte("8=\x01"))
	f.Add([]byte("8=FIX.4.4\x019=5\x01"))
	f.Add([]byte("8=FIX.4.4\x019=5\x0135=0\x0110=000\x01"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, m []byte) {
		_ = parseStored(m)
	})
}
