package venue

import (
	"strings"
	"testing"
)

// A fill's price comes from the trades it opened, closed or reduced: OANDA marks
// orderFillTransaction.price deprecated ("should no longer be used") and its own clients read
// tradeOpened / tradesClosed / tradeReduced, which carry the price each unit was filled at. The
// deprecated field is only a fallback for a fill whose trades carry no price.
func TestDecodeOutcomeReadsTheFillPriceFromItsTrades(t *testing.T) {
	t.Parallel()
	const head = `{"lastTransactionID":"9","orderFillTransaction":{"id":"9","orderID":"8","instrument":"EUR_USD","time":"2026-01-05T10:00:00Z",`
	for _, tc := range []struct {
		name, fill, want string
	}{
		{"an open without the deprecated price", `"units":"1000","tradeOpened":{"tradeID":"9","units":"1000","price":"1.1002"}`, "1.1002"},
		{"a close without the deprecated price", `"units":"-1000","tradesClosed":[{"tradeID":"3","units":"-1000","price":"1.0998"}]`, "1.0998"},
		{"a reduction without the deprecated price", `"units":"-400","tradeReduced":{"tradeID":"3","units":"-400","price":"1.0997"}`, "1.0997"},
		// One fill that closes two trades and reduces a third: its price is the units-weighted
		// average of the shares, (1×1.1 + 3×1.2 + 4×1.3) / 8 = 1.2375.
		{"several shares", `"units":"-8","tradesClosed":[{"tradeID":"3","units":"-1","price":"1.1"},{"tradeID":"4","units":"-3","price":"1.2"}],"tradeReduced":{"tradeID":"5","units":"-4","price":"1.3"}`, "1.2375"},
		// Where both are there, the trade's price wins over the deprecated field.
		{"the trade's price over the deprecated one", `"units":"1000","price":"1.5","tradeOpened":{"tradeID":"9","units":"1000","price":"1.1002"}`, "1.1002"},
		{"the deprecated price alone, as a fallback", `"units":"1000","price":"1.1003","tradeOpened":{"tradeID":"9","units":"1000"}`, "1.1003"},
	} {
		out, err := decodeOutcome([]byte(head + tc.fill + `}}`))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if out.Fill == nil || out.Fill.Price.String() != tc.want {
			t.Errorf("%s: fill %+v, want price %s", tc.name, out.Fill, tc.want)
		}
	}

	// Neither a share's price nor the deprecated field: the fill cannot be booked, so the
	// answer does not decode (the caller reports an unknown outcome, never a guessed price).
	for _, fill := range []string{
		`"units":"1000","tradeOpened":{"tradeID":"9","units":"1000"}`,
		`"units":"1000"`,
		`"units":"-2","tradesClosed":[{"tradeID":"3","units":"-1","price":"1.1"},{"tradeID":"4","units":"-1"}]`,
		`"units":"-2","tradesClosed":[{"tradeID":"3","units":"0","price":"1.1"}]`,
	} {
		if out, err := decodeOutcome([]byte(head + fill + `}}`)); err == nil || !strings.Contains(err.Error(), "price") {
			t.Errorf("fill {%s}: decoded %+v, %v; want an error naming the price", fill, out.Fill, err)
		}
	}
}
