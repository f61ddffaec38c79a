package trading

import (
	"database/sql"
	"fmt"
	"testing"
	"unsafe"

	"fxdesk/internal/risk"
)

// rowScanner hands one row to Scan as the driver does for the destinations the risk view's rows
// use: integers and booleans as values, every other column as bytes (nil for NULL) in a buffer
// the next row overwrites.
type rowScanner struct{ cols []any }

func (s rowScanner) Scan(dest ...any) error {
	if len(dest) != len(s.cols) {
		return fmt.Errorf("%d destinations for %d columns", len(dest), len(s.cols))
	}
	for i, c := range s.cols {
		switch d := dest[i].(type) {
		case *int64:
			*d = c.(int64)
		case *bool:
			*d = c.(bool)
		case *sql.RawBytes:
			if c == nil {
				*d = nil
				continue
			}
			*d = append((*d)[:0], c.(string)...) // the same buffer, row after row
		default:
			return fmt.Errorf("column %d: destination %T", i, d)
		}
	}
	return nil
}

// One reused row reads each position whole — a NULL stop or trail as 0, SELL and BUY, the venue
// trade of an EXTERNAL position — and what it returns does not change when the next row is
// scanned into the same buffers; a symbol is one string however many rows name it.
func TestRiskViewRowsReadEachRowWholeIntoOneDestination(t *testing.T) {
	r := newPositionRow()
	a, venueA, err := r.scan(rowScanner{[]any{int64(7), int64(3), "EURUSD", "SELL", "0.10", "1.08512", "1.09000", nil, nil, nil, "T-88"}})
	if err != nil {
		t.Fatal(err)
	}
	b, venueB, err := r.scan(rowScanner{[]any{int64(8), int64(4), "EURUSD", "BUY", "2.50", "1.07000", nil, "1.10000", "0.00150", "1.06850", "T-99"}})
	if err != nil {
		t.Fatal(err)
	}
	wantA := risk.Position{ID: 7, AccountID: 3, Symbol: "EURUSD", Side: risk.Sell, Volume: 0.10, OpenPrice: 1.08512, SL: 1.09}
	wantB := risk.Position{ID: 8, AccountID: 4, Symbol: "EURUSD", Side: risk.Buy, Volume: 2.50, OpenPrice: 1.07, TP: 1.10, TrailDistance: 0.0015, TrailLevel: 1.0685}
	if a != wantA || venueA != "T-88" {
		t.Errorf("first row, read before the second was scanned: %+v %q, want %+v %q", a, venueA, wantA, "T-88")
	}
	if b != wantB || venueB != "T-99" {
		t.Errorf("second row: %+v %q, want %+v %q", b, venueB, wantB, "T-99")
	}
	if _, venue, err := r.scan(rowScanner{[]any{int64(10), int64(4), "GBPUSD", "BUY", "1", "1.2", nil, nil, nil, nil, nil}}); err != nil || venue != "" {
		t.Errorf("an INTERNAL position: venue trade %q, %v; want none", venue, err)
	}
	if unsafe.StringData(a.Symbol) != unsafe.StringData(b.Symbol) {
		t.Error("two rows naming EURUSD hold two strings: the symbol is not interned")
	}
	if _, _, err := r.scan(rowScanner{[]any{int64(9), int64(4), "EURUSD", "BUY", "x", "1.07000", nil, nil, nil, nil, nil}}); err == nil {
		t.Error("a volume that is no number was read")
	}

	ar := newAccountRow()
	acct, err := ar.scan(rowScanner{[]any{int64(3), "retail", "EUR", int64(200), "1250.75", int64(41), true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ar.scan(rowScanner{[]any{int64(4), "pro", "USD", int64(50), "10.00", int64(2), false}}); err != nil {
		t.Fatal(err)
	}
	want := riskViewAccount{Account: risk.Account{ID: 3, Group: "retail", Currency: "EUR", Leverage: 200, Balance: 1250.75, MarginCalled: true}, version: 41}
	if acct != want {
		t.Errorf("account read before the next row: %+v, want %+v", acct, want)
	}
}
