package fix

import (
	"testing"

	"github.com/shopspring/decimal"
)

// Two asks of one position request, both answered, the first late and interleaved with the
// second: the answers are collected per PosReqID, so the first complete collection is the
// answer, whole and once, never a sum of the two.
func TestPositionAnswersOfTwoAsksNeverMix(t *testing.T) {
	t.Parallel()
	s := &Session{positions: map[string]*positionAnswer{}}
	complete := make(chan map[string]decimal.Decimal, 1)
	for _, id := range []string{"pos-1", "pos-2"} {
		s.positions[id] = &positionAnswer{want: -1, got: map[string]decimal.Decimal{}, complete: complete}
	}
	d := decimal.RequireFromString
	s.onPositionAck("pos-1", 2)
	s.onPositionReport("pos-1", "EURUSD", d("1000"))
	s.onPositionAck("pos-2", 2)
	s.onPositionReport("pos-2", "EURUSD", d("1000"))
	s.onPositionReport("pos-2", "AUDUSD", d("-5"))
	s.onPositionReport("pos-1", "AUDUSD", d("-5"))
	got := <-complete
	if len(got) != 2 || !got["EURUSD"].Equal(d("1000")) || !got["AUDUSD"].Equal(d("-5")) {
		t.Fatalf("positions %v; want EURUSD 1000 and AUDUSD -5 (one ask's answer)", got)
	}
	select {
	case again := <-complete:
		t.Fatalf("a second answer %v was handed on", again)
	default:
	}
}
