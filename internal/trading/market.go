package trading

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/tick"
)

// errPricing answers an open or close this process has no usable quote for. A process that may
// not quote at all is refused at the gate instead (gate.ErrNotHolder, the same text).
func errPricing() error { return fx.Errorf(fx.EUNAVAILABLE, fx.MsgPricingUnavailable) }

// quote is a symbol's last price as exact decimals at the instrument's digits.
type quote struct {
	bid, ask decimal.Decimal
	state    tick.State
}

func (q quote) mid() decimal.Decimal { return q.bid.Add(q.ask).Div(two) }

var (
	two     = decimal.NewFromInt(2)
	hundred = decimal.NewFromInt(100)
	one     = decimal.NewFromInt(1)
)

// market is one request's view of prices and instruments. Quotes are read once per symbol, so a
// computation never mixes two prices of the same symbol.
type market struct {
	prices  tick.Prices
	catalog *catalog.Catalog
	seen    map[string]quote
}

func newMarket(p tick.Prices, c *catalog.Catalog) *market {
	return &market{prices: p, catalog: c, seen: map[string]quote{}}
}

// quote returns symbol's price for marking and conversion: any held quote whose symbol is not
// QUOTING_HALTED (a closed market's last price still marks). ok is false when there is none.
func (m *market) quote(symbol string) (quote, bool) {
	if q, ok := m.seen[symbol]; ok {
		return q, true
	}
	in, ok := m.catalog.Instruments[symbol]
	if !ok || m.prices == nil {
		return quote{}, false
	}
	t, ok := m.prices.LastTick(symbol)
	if !ok {
		return quote{}, false
	}
	st := m.prices.SymbolState(symbol)
	if st == tick.QuotingHalted {
		return quote{}, false
	}
	q := quote{
		bid:   decimal.NewFromFloat(t.Bid).Round(int32(in.Digits)),
		ask:   decimal.NewFromFloat(t.Ask).Round(int32(in.Digits)),
		state: st,
	}
	m.seen[symbol] = q
	return q, true
}

// tradable returns symbol's price for a fill or a close: the symbol must be QUOTING. A closed
// market is the client's to wait for (409); anything else means this process cannot quote (503).
// Both refusals of a symbol's state are market state to the risk engine
// (risk.ErrMarketUnavailable): it passes such a position over and retries it later.
func (m *market) tradable(symbol string) (quote, error) {
	if m.prices == nil {
		return quote{}, errPricing()
	}
	switch m.prices.SymbolState(symbol) {
	case tick.MarketClosed:
		return quote{}, marketState(fx.Errorf(fx.ECONFLICT, "The market for %s is closed.", symbol))
	case tick.Quoting:
	default:
		return quote{}, marketState(errPricing())
	}
	q, ok := m.quote(symbol)
	if !ok || q.state != tick.Quoting {
		return quote{}, marketState(errPricing())
	}
	return q, nil
}

// errHalted refuses a fill or a close on a HALTED instrument (409), market state to the risk
// engine.
func errHalted(symbol string) error {
	return marketState(fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", symbol))
}

// marketStateError is a client's *fx.Error that the risk engine also recognises as
// risk.ErrMarketUnavailable.
type marketStateError struct{ err error }

func marketState(err error) error { return marketStateError{err} }

func (e marketStateError) Error() string   { return e.err.Error() }
func (e marketStateError) Unwrap() []error { return []error{e.err, risk.ErrMarketUnavailable} }

// ratio is an exact conversion factor num/den, divided once at the end.
type ratio struct{ num, den decimal.Decimal }

func (r ratio) mul(o ratio) ratio { return ratio{r.num.Mul(o.num), r.den.Mul(o.den)} }

// toUSD is the value of one unit of ccy in USD: the mid of CCYUSD, or 1 / the mid of USDCCY.
func (m *market) toUSD(ccy string) (ratio, bool) {
	if ccy == "USD" {
		return ratio{one, one}, true
	}
	if s, ok := m.catalog.Pairs[ccy+"USD"]; ok {
		if q, ok := m.quote(s); ok {
			return ratio{q.mid(), one}, true
		}
		return ratio{}, false
	}
	if s, ok := m.catalog.Pairs["USD"+ccy]; ok {
		if q, ok := m.quote(s); ok {
			return ratio{one, q.mid()}, true
		}
	}
	return ratio{}, false
}

// rate is the factor that turns an amount in from into an amount in to, through the USD hub.
func (m *market) rate(from, to string) (ratio, bool) {
	if from == to {
		return ratio{one, one}, true
	}
	a, ok := m.toUSD(from)
	if !ok {
		return ratio{}, false
	}
	b, ok := m.toUSD(to)
	if !ok {
		return ratio{}, false
	}
	return a.mul(ratio{b.den, b.num}), true
}

// convert turns amount in from into to, rounded to to's minor units: to is always an account's
// currency, and what convert returns is booked or marked in it.
func (m *market) convert(amount decimal.Decimal, from, to string) (decimal.Decimal, bool) {
	r, ok := m.rate(from, to)
	if !ok {
		return decimal.Decimal{}, false
	}
	return fx.RoundMoney(to, amount.Mul(r.num).DivRound(r.den, 16)), true
}

// fillPrice is where an order on side fills: a buy at ask + markup, a sell at bid − markup.
func fillPrice(in catalog.Instrument, q quote, side fx.Side) decimal.Decimal {
	markup := in.Group.MarkupPoints.Mul(in.Point)
	if side == fx.Buy {
		return q.ask.Add(markup)
	}
	return q.bid.Sub(markup)
}

// closePrice is where a position on side closes: the opposite fill.
func closePrice(in catalog.Instrument, q quote, side fx.Side) decimal.Decimal {
	if side == fx.Buy {
		return fillPrice(in, q, fx.Sell)
	}
	return fillPrice(in, q, fx.Buy)
}

// profitQuote is the profit, in the quote currency, of volume lots opened at open and closed at
// close. For an aggregate, pass volume=Σv and volumePrice=Σ(v×open).
func profitQuote(in catalog.Instrument, side fx.Side, volume, volumePrice, close decimal.Decimal) decimal.Decimal {
	diff := close.Mul(volume).Sub(volumePrice)
	if side == fx.Sell {
		diff = diff.Neg()
	}
	return diff.Mul(in.ContractSize)
}

// effectiveLeverage is the least of the account's, its group's and the instrument's leverage.
func effectiveLeverage(a Account, g catalog.AccountGroup, in catalog.Instrument) int64 {
	return int64(min(a.Leverage, g.LeverageMax, in.LeverageMax))
}

// marginVolume is the lots that carry margin on one symbol: the unhedged part at full rate and
// each lot of a hedged pair at the group's hedged margin rate.
func marginVolume(in catalog.Instrument, long, short decimal.Decimal) decimal.Decimal {
	hedged := decimal.Min(long, short)
	net := long.Sub(short).Abs()
	return net.Add(hedged.Mul(two).Mul(in.Group.HedgedMarginRate))
}

// exposure is an account's open volume on one symbol and side, with Σ(volume × openPrice).
type exposure struct {
	Symbol      string
	Side        fx.Side
	Volume      decimal.Decimal
	VolumePrice decimal.Decimal
}

// Metrics are an account's live figures in its own currency.
type Metrics struct {
	Balance     decimal.Decimal
	Equity      decimal.Decimal
	UsedMargin  decimal.Decimal
	FreeMargin  decimal.Decimal
	MarginLevel *decimal.Decimal // nil when no margin is used
}

// StoredMetrics are a's metrics from its stored marks (the last reconcile or fill), for reads
// that do not price the account live: the account list, and Account when a position cannot be
// priced here.
func (a Account) StoredMetrics() Metrics {
	m := Metrics{Balance: a.Balance, Equity: a.Equity, UsedMargin: a.UsedMargin, FreeMargin: a.Equity.Sub(a.UsedMargin)}
	if a.UsedMargin.IsPositive() {
		l := a.Equity.Mul(hundred).DivRound(a.UsedMargin, 2)
		m.MarginLevel = &l
	}
	return m
}

// metrics marks an account: equity = balance + Σ floating profit at the close price (each
// symbol-and-side rounded once), used margin per symbol = margin volume × contract × mid ÷
// effective leverage (rounded once per symbol), margin level = equity ÷ used margin × 100.
// ok is false when some symbol or conversion leg has no usable price.
func (m *market) metrics(a Account, g catalog.AccountGroup, balance decimal.Decimal, exps []exposure) (Metrics, bool) {
	out := Metrics{Balance: balance, Equity: balance, UsedMargin: decimal.Zero}
	type legs struct{ long, short decimal.Decimal }
	bySymbol := map[string]*legs{}
	var order []string
	for _, e := range exps {
		in, ok := m.catalog.Instruments[e.Symbol]
		if !ok {
			return Metrics{}, false
		}
		q, ok := m.quote(e.Symbol)
		if !ok {
			return Metrics{}, false
		}
		p, ok := m.convert(profitQuote(in, e.Side, e.Volume, e.VolumePrice, closePrice(in, q, e.Side)), in.Quote, a.Currency)
		if !ok {
			return Metrics{}, false
		}
		out.Equity = out.Equity.Add(p)
		l := bySymbol[e.Symbol]
		if l == nil {
			l = &legs{decimal.Zero, decimal.Zero}
			bySymbol[e.Symbol] = l
			order = append(order, e.Symbol)
		}
		if e.Side == fx.Buy {
			l.long = l.long.Add(e.Volume)
		} else {
			l.short = l.short.Add(e.Volume)
		}
	}
	for _, s := range order {
		in := m.catalog.Instruments[s]
		q, _ := m.quote(s)
		l := bySymbol[s]
		mq := marginVolume(in, l.long, l.short).Mul(in.ContractSize).Mul(q.mid()).
			DivRound(decimal.NewFromInt(effectiveLeverage(a, g, in)), 16)
		mc, ok := m.convert(mq, in.Quote, a.Currency)
		if !ok {
			return Metrics{}, false
		}
		out.UsedMargin = out.UsedMargin.Add(mc)
	}
	out.FreeMargin = out.Equity.Sub(out.UsedMargin)
	if out.UsedMargin.IsPositive() {
		lvl := out.Equity.Mul(hundred).DivRound(out.UsedMargin, 2)
		out.MarginLevel = &lvl
	}
	return out, true
}
