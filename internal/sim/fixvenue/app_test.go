package fixvenue

import (
	"errors"
	"testing"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// Messages with a repeating group are gap-filled instead of resent (QuickFIX/Go v0.9.10 resends
// them with two checksums); execution reports, which carry none, are resent. ToApp is what the
// library asks on every resend.
func TestResendSkipsMessagesWithRepeatingGroups(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		msgType string
		possDup bool
		refused bool
	}{
		{msgPositionReport, true, true},
		{msgRequestForPosAck, true, true},
		{msgPositionReport, false, false},
		{msgExecutionReport, true, false},
	} {
		m := quickfix.NewMessage()
		m.Header.SetString(tag.MsgType, c.msgType)
		if c.possDup {
			m.Header.SetBool(tag.PossDupFlag, true)
		}
		err := s.ToApp(m, s.sessionID)
		if got := errors.Is(err, quickfix.ErrDoNotSend); got != c.refused {
			t.Errorf("%s possDup=%v: refused=%v, want %v", c.msgType, c.possDup, got, c.refused)
		}
	}
}

// Net positions: an increase averages the price, a reduction keeps it, a flip starts anew.
func TestNettingAveragesIncreasesAndKeepsReductions(t *testing.T) {
	s, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := s.book
	steps := []struct{ units, px, wantUnits, wantPx string }{
		{"1000", "1.1", "1000", "1.1"},
		{"1000", "1.2", "2000", "1.15"},
		{"-500", "1.3", "1500", "1.15"},
		{"-2500", "1.0", "-1000", "1"},
		{"1000", "1.4", "0", "0"},
	}
	for i, st := range steps {
		b.netLocked("EURUSD", dec(st.units), dec(st.px))
		u, px := b.net("EURUSD")
		if !u.Equal(dec(st.wantUnits)) || !px.Equal(dec(st.wantPx)) {
			t.Fatalf("step %d: net %s at %s, want %s at %s", i, u, px, st.wantUnits, st.wantPx)
		}
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }
