package fix

import (
	"testing"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// Two asks of one position request, both answered, the first late and interleaved with the
// second: the answers are collected per PosReqID, so the first complete collection is the
// answer, whole and once, never a sum of the two.
func TestPositionAnswersOfTwoAsksNeverMix(t *testing.T) {
	t.Parallel()
	s := &Session{positions: map[string]*positionAnswer{}}
	complete := make(chan positionResult, 1)
	for _, id := range []string{"pos-1", "pos-2"} {
		s.positions[id] = &positionAnswer{want: -1, got: map[string]decimal.Decimal{}, complete: complete}
	}
	d := decimal.RequireFromString
	s.onPositionAck(positionAck{id: "pos-1", reports: 2})
	s.onPositionReport(positionReport{id: "pos-1", symbol: "EURUSD", net: d("1000"), total: 2})
	s.onPositionAck(positionAck{id: "pos-2", reports: 2})
	s.onPositionReport(positionReport{id: "pos-2", symbol: "EURUSD", net: d("1000"), total: 2})
	s.onPositionReport(positionReport{id: "pos-2", symbol: "AUDUSD", net: d("-5"), total: 2})
	s.onPositionReport(positionReport{id: "pos-1", symbol: "AUDUSD", net: d("-5"), total: 2})
	got := (<-complete).net
	if len(got) != 2 || !got["EURUSD"].Equal(d("1000")) || !got["AUDUSD"].Equal(d("-5")) {
		t.Fatalf("positions %v; want EURUSD 1000 and AUDUSD -5 (one ask's answer)", got)
	}
	select {
	case again := <-complete:
		t.Fatalf("a second answer %v was handed on", again)
	default:
	}
}

// A Reject (35=3) or BusinessMessageReject (35=j) of a RequestForPositions — an LP that
// validates the request against its dictionary — ends the position requests in flight at once
// with the venue's reason; a reject of another message does not.
func TestARejectedPositionRequestEndsIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		msgType, refMsgType string
		ends                bool
	}{
		{msgReject, msgRequestForPos, true},
		{msgBusinessReject, msgRequestForPos, true},
		{msgReject, msgNewOrderSingle, false},
	} {
		s := &Session{positions: map[string]*positionAnswer{}}
		complete := make(chan positionResult, 1)
		s.positions["pos-1"] = &positionAnswer{want: -1, got: map[string]decimal.Decimal{}, complete: complete}
		m := quickfix.NewMessage()
		m.Header.SetString(tag.MsgType, c.msgType)
		m.Body.SetString(tag.RefMsgType, c.refMsgType)
		m.Body.SetInt(tag.RefTagID, 453)
		m.Body.SetString(tag.Text, "Required tag missing")
		if got := s.rejectedQuery(m); got != c.ends {
			t.Fatalf("%s of %s: read as a query's refusal %v, want %v", c.msgType, c.refMsgType, got, c.ends)
		}
		select {
		case res := <-complete:
			if !c.ends || res.refused == nil {
				t.Fatalf("%s of %s: answered %+v", c.msgType, c.refMsgType, res)
			}
		default:
			if c.ends {
				t.Fatalf("%s of %s: the request is still waiting", c.msgType, c.refMsgType)
			}
		}
	}
}
