package feedsim

import "math"

// Instrument is one simulated symbol: where its random walk starts and how it moves. It is not
// the desk's fx.Instrument: the simulator stands in for a provider and knows only what a
// provider would (no contract size, swaps or status); cmd builds its list from the desk's.
type Instrument struct {
	Symbol     string  // desk form, six letters: "EURUSD"
	Digits     int     // decimals quoted on the wire
	Mid        float64 // starting mid price
	Spread     float64 // typical spread, in price units
	Volatility float64 // standard deviation of one walk step, relative to the price
	Calendar   string  // session calendar name: "forex" or "metals"
}

// DefaultInstruments is the default symbol set: 36 FX pairs and spot gold and silver, with late
// 2025 price levels and typical retail spreads. migrations/000002_instruments seeds the same
// symbols (a test in internal/tick checks that they agree).
func DefaultInstruments() []Instrument {
	type row struct {
		symbol       string
		mid          float64
		spreadPoints float64
		digits       int
		vol          float64
		cal          string
	}
	const (
		major  = 0.00003
		cross  = 0.00004
		exotic = 0.00006
		metal  = 0.00008
	)
	rows := []row{
		// Majors.
		{"EURUSD", 1.16000, 6, 5, major, "forex"},
		{"GBPUSD", 1.32000, 9, 5, major, "forex"},
		{"USDJPY", 156.000, 9, 3, major, "forex"},
		{"USDCHF", 0.80500, 12, 5, major, "forex"},
		{"USDCAD", 1.40000, 12, 5, major, "forex"},
		{"AUDUSD", 0.65300, 9, 5, major, "forex"},
		{"NZDUSD", 0.57000, 14, 5, major, "forex"},
		// Crosses.
		{"EURGBP", 0.87800, 12, 5, cross, "forex"},
		{"EURJPY", 181.000, 15, 3, cross, "forex"},
		{"EURCHF", 0.93400, 15, 5, cross, "forex"},
		{"EURAUD", 1.77600, 20, 5, cross, "forex"},
		{"EURCAD", 1.62400, 20, 5, cross, "forex"},
		{"EURNZD", 2.03500, 30, 5, cross, "forex"},
		{"GBPJPY", 205.900, 20, 3, cross, "forex"},
		{"GBPCHF", 1.06300, 22, 5, cross, "forex"},
		{"GBPAUD", 2.02200, 25, 5, cross, "forex"},
		{"GBPCAD", 1.84800, 25, 5, cross, "forex"},
		{"GBPNZD", 2.31600, 40, 5, cross, "forex"},
		{"AUDJPY", 101.900, 15, 3, cross, "forex"},
		{"AUDCHF", 0.52600, 18, 5, cross, "forex"},
		{"AUDCAD", 0.91400, 18, 5, cross, "forex"},
		{"AUDNZD", 1.14600, 20, 5, cross, "forex"},
		{"NZDJPY", 88.900, 20, 3, cross, "forex"},
		{"NZDCHF", 0.45900, 22, 5, cross, "forex"},
		{"NZDCAD", 0.79800, 22, 5, cross, "forex"},
		{"CADJPY", 111.400, 18, 3, cross, "forex"},
		{"CADCHF", 0.57500, 20, 5, cross, "forex"},
		{"CHFJPY", 193.800, 22, 3, cross, "forex"},
		// Exotics.
		{"USDSEK", 9.45000, 300, 5, exotic, "forex"},
		{"USDNOK", 10.12000, 300, 5, exotic, "forex"},
		{"USDMXN", 18.35000, 250, 5, exotic, "forex"},
		{"USDZAR", 17.15000, 400, 5, exotic, "forex"},
		{"USDSGD", 1.29800, 25, 5, exotic, "forex"},
		{"USDHKD", 7.78000, 40, 5, exotic, "forex"},
		{"USDCNH", 7.08000, 60, 5, exotic, "forex"},
		{"USDPLN", 3.65000, 250, 5, exotic, "forex"},
		// Spot metals (gold per troy ounce, silver per troy ounce).
		{"XAUUSD", 4150.00, 25, 2, metal, "metals"},
		{"XAGUSD", 50.500, 25, 3, metal, "metals"},
	}
	out := make([]Instrument, 0, len(rows))
	for _, r := range rows {
		out = append(out, Instrument{
			Symbol:     r.symbol,
			Digits:     r.digits,
			Mid:        r.mid,
			Spread:     r.spreadPoints * math.Pow10(-r.digits),
			Volatility: r.vol,
			Calendar:   r.cal,
		})
	}
	return out
}
