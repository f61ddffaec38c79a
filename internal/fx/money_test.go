package fx

import (
	"strings"
	"testing"
)

// The table holds the figures ISO 4217 publishes for the currencies the desk can involve, and
// refuses what is not money an account can hold.
func TestMinorUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code   string
		places int32
		ok     bool
	}{
		{"USD", 2, true}, {"EUR", 2, true}, {"GBP", 2, true}, {"JPY", 0, true}, {"CHF", 2, true},
		{"CAD", 2, true}, {"AUD", 2, true}, {"NZD", 2, true}, {"SEK", 2, true}, {"NOK", 2, true},
		{"DKK", 2, true}, {"PLN", 2, true}, {"CZK", 2, true}, {"HUF", 2, true}, {"TRY", 2, true},
		{"ZAR", 2, true}, {"MXN", 2, true}, {"SGD", 2, true}, {"HKD", 2, true}, {"CNH", 2, true},
		{"CNY", 2, true}, {"KWD", 3, true}, {"BHD", 3, true}, {"OMR", 3, true}, {"JOD", 3, true},
		{"TND", 3, true}, {"KRW", 0, true}, {"ISK", 0, true}, {"CLP", 0, true},
		// Metals, fund codes, test codes, withdrawn codes and the lower-case form are not.
		{"XAU", 0, false}, {"XAG", 0, false}, {"XPT", 0, false}, {"XPD", 0, false},
		{"XDR", 0, false}, {"CLF", 0, false}, {"XTS", 0, false}, {"XXX", 0, false},
		{"HRK", 0, false}, {"usd", 0, false}, {"", 0, false},
	} {
		places, ok := MinorUnits(tc.code)
		if ok != tc.ok || (ok && places != tc.places) {
			t.Errorf("MinorUnits(%q) = %d, %v; want %d, %v", tc.code, places, ok, tc.places, tc.ok)
		}
		err := CheckAccountCurrency(tc.code)
		if tc.ok != (err == nil) {
			t.Errorf("CheckAccountCurrency(%q) = %v", tc.code, err)
		}
		if err != nil && (ErrorCode(err) != EINVALID || !strings.Contains(ErrorMessage(err), "accounts hold fiat currencies")) {
			t.Errorf("CheckAccountCurrency(%q) = %v, want EINVALID saying accounts hold fiat currencies", tc.code, err)
		}
	}
	if msg := ErrorMessage(CheckAccountCurrency("XAU")); !strings.HasPrefix(msg, "XAU is gold") {
		t.Errorf("XAU refusal %q does not name the metal", msg)
	}
	for code, places := range minorUnits {
		if len(code) != 3 || strings.ToUpper(code) != code || places < 0 || places > 3 {
			t.Errorf("table entry %q: %d", code, places)
		}
	}
}
