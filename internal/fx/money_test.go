package fx

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// The table holds the figures ISO 4217 publishes for the currencies the desk can involve, and
// refuses what is not money an account can hold.
func TestMinorUnitsAreISO4217sForHoldableCurrencies(t *testing.T) {
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

// Money in a currency is accepted exactly when rounding it to the currency's minor units leaves
// it unchanged, and is written back with exactly those places.
func TestCheckMoneyAcceptsOnlyExactMinorUnits(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	for _, tc := range []struct {
		currency, amount string
		ok               bool
		text             string // FormatMoney when ok
		says             string // part of the refusal otherwise
	}{
		{"JPY", "100", true, "100", ""},
		{"JPY", "100.00", true, "100", ""},
		{"JPY", "100.5", false, "", "amount 100.5 has decimals: JPY amounts are whole numbers."},
		{"USD", "10.5", true, "10.50", ""},
		{"USD", "10.505", false, "", "more than 2 decimals, the most USD allows"},
		{"KWD", "1.125", true, "1.125", ""},
		{"KWD", "1.1255", false, "", "more than 3 decimals, the most KWD allows"},
		{"XAU", "1.25", true, "1.25", ""}, // an account opened before the table keeps two places
	} {
		err := CheckMoney("amount", tc.currency, d(tc.amount))
		if tc.ok != (err == nil) || (err != nil && (ErrorCode(err) != EINVALID || !strings.Contains(ErrorMessage(err), tc.says))) {
			t.Errorf("CheckMoney(%s %s) = %v", tc.amount, tc.currency, err)
		}
		if tc.ok {
			if got := FormatMoney(tc.currency, d(tc.amount)); got != tc.text {
				t.Errorf("FormatMoney(%s %s) = %q, want %q", tc.amount, tc.currency, got, tc.text)
			}
		}
	}
	// Half away from zero, at each currency's places.
	for _, tc := range []struct{ currency, in, want string }{
		{"JPY", "1050.5", "1051"}, {"JPY", "-1050.5", "-1051"}, {"JPY", "1050.07", "1050"},
		{"USD", "0.005", "0.01"}, {"KWD", "2.2795", "2.280"}, {"KWD", "-0.0005", "-0.001"},
	} {
		if got := FormatMoney(tc.currency, RoundMoney(tc.currency, d(tc.in))); got != tc.want {
			t.Errorf("RoundMoney(%s %s) = %s, want %s", tc.in, tc.currency, got, tc.want)
		}
	}
	most := int32(0)
	for _, places := range minorUnits {
		most = max(most, places)
	}
	if most != MaxMoneyPlaces {
		t.Errorf("MaxMoneyPlaces = %d, the table's most is %d (the money columns' scale must follow)", MaxMoneyPlaces, most)
	}
}

// Whatever a request carries, an amount ParseDecimal accepts at MaxMoneyPlaces passes
// CheckMoney in a currency exactly when it is already rounded to that currency's places, and
// what FormatMoney writes reads back as the same amount.
func FuzzCheckMoney(f *testing.F) {
	for _, s := range []string{"1", "100.5", "0.001", "-2.50", "1050.07", "999999999999999.999"} {
		f.Add(s, "JPY")
		f.Add(s, "KWD")
		f.Add(s, "USD")
	}
	f.Fuzz(func(t *testing.T, s, currency string) {
		a, err := ParseDecimal("amount", s, MaxMoneyPlaces)
		if err != nil {
			return
		}
		err = CheckMoney("amount", currency, a)
		if rounded := RoundMoney(currency, a).Equal(a); rounded != (err == nil) {
			t.Fatalf("CheckMoney(%s %q) = %v, but rounding it changes it: %v", s, currency, err, !rounded)
		}
		if err != nil {
			if ErrorCode(err) != EINVALID {
				t.Fatalf("refusal with code %s", ErrorCode(err))
			}
			return
		}
		back, perr := decimal.NewFromString(FormatMoney(currency, a))
		if perr != nil || !back.Equal(a) {
			t.Fatalf("FormatMoney(%s %q) = %q reads back as %s (%v)", s, currency, FormatMoney(currency, a), back, perr)
		}
	})
}
