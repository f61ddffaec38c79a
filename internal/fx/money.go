package fx

import (
	"github.com/shopspring/decimal"
)

// minorUnits holds the fiat currencies an account may be opened in, with their ISO 4217 minor
// units (ISO 4217 list one, current codes): money in an account's currency is rounded to these
// places. Every code the desk's instruments can involve is here, and the rest of the current
// list, so that a currency is refused for what it is rather than for a gap in the table; a fiat
// currency the USD hub cannot convert is refused separately, by the trading service.
//
// Left out on purpose: the metals (XAU, XAG, XPT, XPD) — 0.01 XAU is about 20 USD, and a metal
// is an instrument the desk quotes, not money an account holds; the fund and accounting codes
// (XDR, XSU, XUA, BOV, CHE, CHW, CLF, COU, MXV, USN, UYI, UYW); the testing codes XTS and XXX;
// withdrawn codes (HRK, SLL, ZWL, …).
//
// CNH is not an ISO 4217 code: it is the market's name for the yuan traded offshore (Hong Kong),
// the currency the desk's USDCNH quotes. It is the same money as CNY — the same fen, two places —
// and offshore brokers open CNH accounts, so it is accepted beside CNY with CNY's minor units.
var minorUnits = map[string]int32{
	// The desk's instrument currencies and the other majors.
	"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "CHF": 2, "CAD": 2, "AUD": 2, "NZD": 2,
	"SEK": 2, "NOK": 2, "DKK": 2, "PLN": 2, "CZK": 2, "HUF": 2, "TRY": 2, "ZAR": 2,
	"MXN": 2, "SGD": 2, "HKD": 2, "CNY": 2, "CNH": 2,
	// Three places.
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	// No minor unit.
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "KMF": 0, "KRW": 0, "PYG": 0,
	"RWF": 0, "UGX": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	// The rest of ISO 4217's current fiat currencies, all with two places.
	"AED": 2, "AFN": 2, "ALL": 2, "AMD": 2, "ANG": 2, "AOA": 2, "ARS": 2, "AWG": 2,
	"AZN": 2, "BAM": 2, "BBD": 2, "BDT": 2, "BGN": 2, "BMD": 2, "BND": 2, "BOB": 2,
	"BRL": 2, "BSD": 2, "BTN": 2, "BWP": 2, "BYN": 2, "BZD": 2, "CDF": 2, "COP": 2,
	"CRC": 2, "CUP": 2, "CVE": 2, "DOP": 2, "DZD": 2, "EGP": 2, "ERN": 2, "ETB": 2,
	"FJD": 2, "FKP": 2, "GEL": 2, "GHS": 2, "GIP": 2, "GMD": 2, "GTQ": 2, "GYD": 2,
	"HNL": 2, "HTG": 2, "IDR": 2, "ILS": 2, "INR": 2, "IRR": 2, "JMD": 2, "KES": 2,
	"KGS": 2, "KHR": 2, "KPW": 2, "KYD": 2, "KZT": 2, "LAK": 2, "LBP": 2, "LKR": 2,
	"LRD": 2, "LSL": 2, "MAD": 2, "MDL": 2, "MGA": 2, "MKD": 2, "MMK": 2, "MNT": 2,
	"MOP": 2, "MRU": 2, "MUR": 2, "MVR": 2, "MWK": 2, "MYR": 2, "MZN": 2, "NAD": 2,
	"NGN": 2, "NIO": 2, "NPR": 2, "PAB": 2, "PEN": 2, "PGK": 2, "PHP": 2, "PKR": 2,
	"QAR": 2, "RON": 2, "RSD": 2, "RUB": 2, "SAR": 2, "SBD": 2, "SCR": 2, "SDG": 2,
	"SHP": 2, "SLE": 2, "SOS": 2, "SRD": 2, "SSP": 2, "STN": 2, "SVC": 2, "SYP": 2,
	"SZL": 2, "THB": 2, "TJS": 2, "TMT": 2, "TOP": 2, "TTD": 2, "TWD": 2, "TZS": 2,
	"UAH": 2, "UYU": 2, "UZS": 2, "VED": 2, "VES": 2, "WST": 2, "XCD": 2, "YER": 2,
	"ZMW": 2, "ZWG": 2,
}

// metals are the ISO 4217 precious-metal codes, named in the refusal so a trader asking for a
// gold account hears why.
var metals = map[string]string{"XAU": "gold", "XAG": "silver", "XPT": "platinum", "XPD": "palladium"}

// MaxMoneyPlaces is the most places any account currency has: the scale of the money columns.
const MaxMoneyPlaces = 3

// legacyMoneyPlaces is the precision of every account before the table: an account row opened
// then in a code the table does not hold (an XAU account) keeps the places its deals carry.
const legacyMoneyPlaces = 2

// MinorUnits returns currency's ISO 4217 minor units; ok is false when currency is not a fiat
// currency an account may hold.
func MinorUnits(currency string) (places int32, ok bool) {
	places, ok = minorUnits[currency]
	return places, ok
}

// CheckAccountCurrency returns nil when an account may be opened in currency, and an EINVALID
// error naming it otherwise: accounts hold fiat currencies, never metals or unknown codes.
func CheckAccountCurrency(currency string) error {
	if _, ok := minorUnits[currency]; ok {
		return nil
	}
	if metal, ok := metals[currency]; ok {
		return Errorf(EINVALID, "%s is %s, not a currency: accounts hold fiat currencies (such as USD, EUR, JPY).", currency, metal)
	}
	return Errorf(EINVALID, "%q is not a fiat currency the desk knows: accounts hold fiat currencies with an ISO 4217 code (such as USD, EUR, JPY).", currency)
}

// MoneyPlaces is how many decimals money in currency carries: its minor units.
func MoneyPlaces(currency string) int32 {
	if places, ok := minorUnits[currency]; ok {
		return places
	}
	return legacyMoneyPlaces
}

// RoundMoney rounds an exact amount in currency to its minor units, half away from zero.
// ledger.Post rounds every amount it writes with it; a writer that moves a locked balance ahead
// of the posting (the group commit) rounds the same way, so the two agree.
func RoundMoney(currency string, d decimal.Decimal) decimal.Decimal {
	return d.Round(MoneyPlaces(currency))
}

// FormatMoney writes an amount in currency with exactly its minor units: "1050" yen, "10.50"
// dollars, "1.250" dinars. Money leaves the desk in this form.
func FormatMoney(currency string, d decimal.Decimal) string {
	return d.StringFixed(MoneyPlaces(currency))
}

// CheckMoney returns an EINVALID error naming field and currency when amount carries more
// decimals than currency's minor units.
func CheckMoney(field, currency string, amount decimal.Decimal) error {
	places := MoneyPlaces(currency)
	if amount.Equal(amount.Truncate(places)) {
		return nil
	}
	if places == 0 {
		return Errorf(EINVALID, "%s %s has decimals: %s amounts are whole numbers.", field, amount, currency)
	}
	return Errorf(EINVALID, "%s %s has more than %d decimals, the most %s allows.", field, amount, places, currency)
}
