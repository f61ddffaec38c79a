package mirror

import (
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/tick"
)

// One encoding for both transports, written and read by encoding/json: a quote is the same
// object in the snapshot and on the stream — bid and ask as decimal strings in the instrument's
// digits, receivedAt on the holder's clock as RFC 3339 UTC with milliseconds — so an operator
// reads either with redis-cli, and a follower never stores a quote it cannot price or date.

// quoteJSON is one quote as both transports carry it.
type quoteJSON struct {
	Bid        string `json:"bid"`
	Ask        string `json:"ask"`
	ReceivedAt stamp  `json:"receivedAt"`
}

// stamp is a holder-clock time as the transports spell it: RFC 3339 in UTC with exactly three
// decimals ("2026-12-01T18:20:09.870Z"), one width for every time an operator reads.
type stamp time.Time

const stampLayout = "2006-01-02T15:04:05.000Z"

func (s stamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(stampLayout)+2)
	b = append(b, '"')
	b = time.Time(s).UTC().AppendFormat(b, stampLayout)
	return append(b, '"'), nil
}

func (s *stamp) UnmarshalJSON(b []byte) error {
	var t time.Time
	if err := t.UnmarshalJSON(b); err != nil {
		return err
	}
	*s = stamp(t)
	return nil
}

// maxPrice bounds what the transports carry: no price this desk quotes comes near it, and below
// it every decimal string in an instrument's digits is short.
const maxPrice = 1e15

// publishable reports whether q is a quote a follower accepts: positive, finite, uncrossed
// prices and a receipt time. The tick engine accepts no other, so this only keeps a transport
// from writing what its followers would refuse.
func publishable(q *tick.Quote) bool {
	return q.Bid > 0 && q.Bid < maxPrice && q.Ask > 0 && q.Ask < maxPrice && q.Bid <= q.Ask && !q.ReceivedAt.IsZero()
}

// encodeQuote spells q with digits decimals (outside 0–15: the shortest decimal that reads back
// as the same float, for a symbol with no instrument row).
func encodeQuote(q *tick.Quote, digits int) quoteJSON {
	if digits < 0 || digits > 15 {
		digits = -1
	}
	return quoteJSON{
		Bid:        strconv.FormatFloat(q.Bid, 'f', digits, 64),
		Ask:        strconv.FormatFloat(q.Ask, 'f', digits, 64),
		ReceivedAt: stamp(q.ReceivedAt),
	}
}

// decode reads q back: ok is false unless it holds decimal prices publishable allows and a
// receipt time. receivedAt is on the holder's clock (see receivedHere).
func (q quoteJSON) decode() (bid, ask float64, receivedAt time.Time, ok bool) {
	bid, okBid := parsePrice(q.Bid)
	ask, okAsk := parsePrice(q.Ask)
	receivedAt = time.Time(q.ReceivedAt)
	return bid, ask, receivedAt, okBid && okAsk && bid <= ask && !receivedAt.IsZero()
}

// parsePrice reads a positive decimal string: digits and at most one point, nothing
// strconv.ParseFloat would also take (exponents, "Inf", hexadecimal).
func parsePrice(s string) (float64, bool) {
	if s == "" || strings.Trim(s, "0123456789.") != "" || strings.Count(s, ".") > 1 {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil && v > 0 && v < maxPrice
}
