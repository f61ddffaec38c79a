package tick

import (
	"fmt"

	"fxdesk/internal/fx"
)

// ProviderPair maps a desk symbol to the provider's pair: EURUSD → "EUR/USD", XAUUSD → "XAU/USD".
func ProviderPair(symbol string) (string, error) {
	if !fx.ValidSymbol(symbol) {
		return "", fmt.Errorf("symbol %q is not six upper-case letters like EURUSD", symbol)
	}
	return symbol[:3] + "/" + symbol[3:], nil
}

// DeskSymbol maps a provider pair to the desk symbol: "EUR/USD" → EURUSD.
func DeskSymbol(pair string) (string, error) {
	if len(pair) != 7 || pair[3] != '/' {
		return "", fmt.Errorf("provider pair %q is not of the form EUR/USD", pair)
	}
	s := pair[:3] + pair[4:]
	if !fx.ValidSymbol(s) {
		return "", fmt.Errorf("provider pair %q is not of the form EUR/USD", pair)
	}
	return s, nil
}
