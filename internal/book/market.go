package book

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/tick"
)

// ErrPricing answers an open or close this process has no usable quote for. A process that may
// not quote at all is refused at the gate instead (gate.ErrNotHolder, the same text).
func ErrPricing() error { return fx.Errorf(fx.EUNAVAILABLE, fx.MsgPricingUnavailable) }

// Quote is a symbol's last price as exact decimals at the instrument's digits.
type Quote struct {
	Bid, Ask decimal.Decimal
	State    tick.State
}

func (q Quote) Mid() decimal.Decimal { return q.Bid.Add(q.Ask).Div(two) }

var (
	two     = decimal.NewFromInt(2)
	hundred = decimal.NewFromInt(100)
	one     = decimal.NewFromInt(1)
)

// Market is one request's view of prices and instruments. Quotes are read once per symbol, so a
// computation never mixes two prices of the same symbol.
type Market struct {
	prices  tick.Prices
	Catalog *catalog.Catalog
	seen    map[string]Quote
}

func NewMarket(p tick.Prices, c *catalog.Catalog) *Market {
	return &Market{prices: p, Catalog: c, seen: map[string]Quote{}}
}

// Quote returns symbol's price for marking and conversion: any held Quote whose symbol is not
// QUOTING_HALTED (a closed market's last price still marks). ok is false when there is none.
func (m *Market) Quote(symbol string) (Quote, bool) {
	if q, ok := m.seen[symbol]; ok {
		return q, true
	}
	in, ok := m.Catalog.Instruments[symbol]
	if !ok || m.prices == nil {
		return Quote{}, false
	}
	t, ok := m.prices.LastTick(symbol)
	if !ok {
		return Quote{}, false
	}
	st := m.prices.SymbolState(symbol)
	if st == tick.QuotingHalted {
		return Quote{}, false
	}
	q := TickQuote(in, t)
	q.State = st
	m.seen[symbol] = q
	return q, true
}

// TickQuote is feed quote t of in at in's quoted decimals, the price every fill, close and mark
// starts from (State left for the caller).
func TickQuote(in catalog.Instrument, t tick.Quote) Quote {
	return Quote{
		Bid: decimal.NewFromFloat(t.Bid).Round(int32(in.Digits)),
		Ask: decimal.NewFromFloat(t.Ask).Round(int32(in.Digits)),
	}
}

// Tradable returns symbol's price for a fill or a close: the symbol must be QUOTING. A closed
// market is the client's to wait for (409); anything else means this process cannot quote (503).
// Both refusals of a symbol's state are market state to the risk engine
// (risk.ErrMarketUnavailable): it passes such a position over and retries it later.
func (m *Market) Tradable(symbol string) (Quote, error) {
	if m.prices == nil {
		return Quote{}, ErrPricing()
	}
	switch m.prices.SymbolState(symbol) {
	case tick.MarketClosed:
		return Quote{}, MarketState(fx.Errorf(fx.ECONFLICT, "The market for %s is closed.", symbol))
	case tick.Quoting:
	default:
		return Quote{}, MarketState(ErrPricing())
	}
	q, ok := m.Quote(symbol)
	if !ok || q.State != tick.Quoting {
		return Quote{}, MarketState(ErrPricing())
	}
	return q, nil
}

// ErrHalted refuses a fill or a close on a HALTED instrument (409), market state to the risk
// engine.
func ErrHalted(symbol string) error {
	return MarketState(fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", symbol))
}

// marketStateError is a client's *fx.Error that the risk engine also recognises as
// risk.ErrMarketUnavailable.
type marketStateError struct{ err error }

func MarketState(err error) error { return marketStateError{err} }

func (e marketStateError) Error() string   { return e.err.Error() }
func (e marketStateError) Unwrap() []error { return []error{e.err, risk.ErrMarketUnavailable} }

// ratio is an exact conversion factor num/den, divided once at the end.
type ratio struct{ num, den decimal.Decimal }

func (r ratio) mul(o ratio) ratio { return ratio{r.num.Mul(o.num), r.den.Mul(o.den)} }

// toUSD is the value of one unit of ccy in USD: the mid of CCYUSD, or 1 / the mid of USDCCY.
func (m *Market) toUSD(ccy string) (ratio, bool) {
	if ccy == "USD" {
		return ratio{one, one}, true
	}
	if s, ok := m.Catalog.Pairs[ccy+"USD"]; ok {
		if q, ok := m.Quote(s); ok {
			return ratio{q.Mid(), one}, true
		}
		return ratio{}, false
	}
	if s, ok := m.Catalog.Pairs["USD"+ccy]; ok {
		if q, ok := m.Quote(s); ok {
			return ratio{one, q.Mid()}, true
		}
	}
	return ratio{}, false
}

// rate is the factor that turns an amount in from into an amount in to, through the USD hub.
func (m *Market) rate(from, to string) (ratio, bool) {
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

// Convert turns amount in from into to, rounded to to's minor units: to is always an account's
// currency, and what Convert returns is booked or marked in it.
func (m *Market) Convert(amount decimal.Decimal, from, to string) (decimal.Decimal, bool) {
	r, ok := m.rate(from, to)
	if !ok {
		return decimal.Decimal{}, false
	}
	return fx.RoundMoney(to, amount.Mul(r.num).DivRound(r.den, 16)), true
}

// Converter is Convert from from to to with the rate read once: the same figures, for a loop
// over many amounts in one pair (the dealer's floating P&L marks every account's positions).
func (m *Market) Converter(from, to string) (func(decimal.Decimal) decimal.Decimal, bool) {
	r, ok := m.rate(from, to)
	if !ok {
		return nil, false
	}
	convert := func(amount decimal.Decimal) decimal.Decimal {
		return fx.RoundMoney(to, amount.Mul(r.num).DivRound(r.den, 16))
	}
	if !r.num.Equal(one) || !r.den.Equal(one) {
		return convert, true
	}
	// A rate of one leaves an amount of at most 16 decimals as it is until the rounding.
	return func(amount decimal.Decimal) decimal.Decimal {
		if amount.Exponent() >= -16 {
			return fx.RoundMoney(to, amount)
		}
		return convert(amount)
	}, true
}

// FillPrice is where an order on side fills: a buy at ask + markup, a sell at bid − markup.
func FillPrice(in catalog.Instrument, q Quote, side fx.Side) decimal.Decimal {
	markup := in.Group.MarkupPoints.Mul(in.Point)
	if side == fx.Buy {
		return q.Ask.Add(markup)
	}
	return q.Bid.Sub(markup)
}

// Markup is the spread markup a fill of volume lots carries — the distance FillPrice adds to the
// feed's price, times the lots' units — converted to currency (an account's) as the fill's own
// money is; nil when the conversion has no price. It is the desk's, whatever the fill's book:
// on the B-book it is part of what the trader pays the desk, on the A-book the venue does not
// see it (docs/pnl.md).
func (m *Market) Markup(in catalog.Instrument, volume decimal.Decimal, currency string) *decimal.Decimal {
	q := in.Group.MarkupPoints.Mul(in.Point).Mul(volume).Mul(in.ContractSize)
	out, ok := m.Convert(q, in.Quote, currency)
	if !ok {
		return nil
	}
	return &out
}

// ClosePrice is where a position on side closes: the opposite fill.
func ClosePrice(in catalog.Instrument, q Quote, side fx.Side) decimal.Decimal {
	if side == fx.Buy {
		return FillPrice(in, q, fx.Sell)
	}
	return FillPrice(in, q, fx.Buy)
}

// ProfitQuote is the profit, in the quote currency, of volume lots opened at open and closed at
// close. For an aggregate, pass volume=Σv and volumePrice=Σ(v×open).
func ProfitQuote(in catalog.Instrument, side fx.Side, volume, volumePrice, close decimal.Decimal) decimal.Decimal {
	diff := close.Mul(volume).Sub(volumePrice)
	if side == fx.Sell {
		diff = diff.Neg()
	}
	return diff.Mul(in.ContractSize)
}

// effectiveLeverage is the least of the account's, its group's and the instrument's leverage; in
// carries the account group's terms (catalog.Catalog.Effective), so the instrument's cap is the
// group's override of it where there is one.
func effectiveLeverage(a Account, g catalog.AccountGroup, in catalog.Instrument) int64 {
	return int64(min(a.Leverage, g.LeverageMax, in.LeverageMax))
}

// MarginVolume is the lots that carry margin on one symbol: the unhedged part at full rate and
// each lot of a hedged pair at the group's hedged margin rate.
func MarginVolume(in catalog.Instrument, long, short decimal.Decimal) decimal.Decimal {
	hedged := decimal.Min(long, short)
	net := long.Sub(short).Abs()
	return net.Add(hedged.Mul(two).Mul(in.Group.HedgedMarginRate))
}

// Exposure is an account's open volume on one symbol and side, with Σ(volume × openPrice).
type Exposure struct {
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

// StoredMetrics are a's metrics from its stored marks (the last reconcile or fill), for a read
// that cannot price one of its positions here. ok is false when a was never marked (markedAt
// NULL): its stored equity and used margin are the columns' defaults, not figures, and must not
// be shown as zero.
func (a Account) StoredMetrics() (m Metrics, ok bool) {
	m = Metrics{Balance: a.Balance, Equity: a.Equity, UsedMargin: a.UsedMargin, FreeMargin: a.Equity.Sub(a.UsedMargin)}
	if a.UsedMargin.IsPositive() {
		l := a.Equity.Mul(hundred).DivRound(a.UsedMargin, 2)
		m.MarginLevel = &l
	}
	return m, a.MarkedAt != nil
}

// Metrics marks an account: equity = balance + Σ floating profit at the close price (each
// symbol-and-side rounded once), used margin per symbol = margin volume × contract × mid ÷
// effective leverage (rounded once per symbol), margin level = equity ÷ used margin × 100.
// ok is false when some symbol or conversion leg has no usable price.
func (m *Market) Metrics(a Account, g catalog.AccountGroup, balance decimal.Decimal, exps []Exposure) (Metrics, bool) {
	out := Metrics{Balance: balance, Equity: balance, UsedMargin: decimal.Zero}
	type legs struct{ long, short decimal.Decimal }
	bySymbol := map[string]*legs{}
	var order []string
	for _, e := range exps {
		// The account group's terms on the symbol (markup, leverage cap), as every fill reads them.
		t, ok := m.Catalog.Effective(a.Group, e.Symbol)
		in := t.Instrument
		if !ok {
			return Metrics{}, false
		}
		q, ok := m.Quote(e.Symbol)
		if !ok {
			return Metrics{}, false
		}
		p, ok := m.Convert(ProfitQuote(in, e.Side, e.Volume, e.VolumePrice, ClosePrice(in, q, e.Side)), in.Quote, a.Currency)
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
		t, _ := m.Catalog.Effective(a.Group, s)
		in := t.Instrument
		q, _ := m.Quote(s)
		l := bySymbol[s]
		mq := MarginVolume(in, l.long, l.short).Mul(in.ContractSize).Mul(q.Mid()).
			DivRound(decimal.NewFromInt(effectiveLeverage(a, g, in)), 16)
		mc, ok := m.Convert(mq, in.Quote, a.Currency)
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
