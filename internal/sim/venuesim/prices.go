package venuesim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/feedsim"
)

// PriceSource is where the simulator's prices come from: symbol's current bid and ask in the
// desk's form (EURUSD); ok is false when the symbol is unknown or not quotable now, which the
// venue treats as a halted market.
type PriceSource interface {
	Quote(symbol string) (bid, ask decimal.Decimal, ok bool)
}

// snapshotSource is a PriceSource whose Quote is expensive: the simulator takes one snapshot
// of it per operation, before it locks its account, and prices everything from the snapshot.
type snapshotSource interface {
	snapshot(ctx context.Context) (PriceSource, error)
}

// FeedPrices prices the venue from an in-process feed simulator, so a test that moves a quote
// with feedsim.Server.SetQuote moves the venue's fills with it.
func FeedPrices(feed *feedsim.Server) PriceSource { return feedPrices{feed} }

type feedPrices struct{ feed *feedsim.Server }

func (p feedPrices) Quote(symbol string) (bid, ask decimal.Decimal, ok bool) {
	b, a, ok := p.feed.Quote(symbol)
	if !ok {
		return decimal.Decimal{}, decimal.Decimal{}, false
	}
	return decimal.NewFromFloat(b), decimal.NewFromFloat(a), true
}

// FeedControlPrices prices the venue from a feed simulator in another process, through its
// control API: one GET {controlURL}/control/state per order, close or account read (not per
// symbol). controlURL is the feed simulator's base URL, e.g. http://127.0.0.1:8090.
func FeedControlPrices(controlURL string) (PriceSource, error) {
	base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(controlURL, "/"), "/control/state"), "/control")
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("venuesim: feed control URL %q must look like http://127.0.0.1:8090", controlURL)
	}
	return &feedControlPrices{
		stateURL: base + "/control/state",
		http:     &http.Client{Timeout: 2 * time.Second},
	}, nil
}

type feedControlPrices struct {
	stateURL string
	http     *http.Client
}

// Quote is there so that FeedControlPrices is a PriceSource (Config.Prices); the simulator
// never calls it, it takes one snapshot per operation. A caller that does reads the whole
// state for one symbol.
func (p *feedControlPrices) Quote(symbol string) (bid, ask decimal.Decimal, ok bool) {
	snap, err := p.snapshot(context.Background())
	if err != nil {
		return decimal.Decimal{}, decimal.Decimal{}, false
	}
	return snap.Quote(symbol)
}

func (p *feedControlPrices) snapshot(ctx context.Context) (PriceSource, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.stateURL, nil)
	if err != nil {
		return nil, fmt.Errorf("read feed prices: %w", err)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read feed prices from %s: %w", p.stateURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read feed prices from %s: status %d", p.stateURL, resp.StatusCode)
	}
	var st feedsim.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("read feed prices from %s: %w", p.stateURL, err)
	}
	// A crossed or zero quote is the price book's to refuse, as for every source.
	snap := make(staticPrices, len(st.Symbols))
	for _, s := range st.Symbols {
		if s.Quotable {
			snap[s.Symbol] = quote{decimal.NewFromFloat(s.Bid), decimal.NewFromFloat(s.Ask)}
		}
	}
	return snap, nil
}

type quote struct{ bid, ask decimal.Decimal }

func (q quote) mid() decimal.Decimal { return q.bid.Add(q.ask).Div(decimal.NewFromInt(2)) }

// staticPrices is a snapshot: the symbols it holds are quotable at those prices.
type staticPrices map[string]quote

func (p staticPrices) Quote(symbol string) (bid, ask decimal.Decimal, ok bool) {
	q, ok := p[symbol]
	return q.bid, q.ask, ok
}

// priceBook prices one operation: it asks the source once per symbol and converts amounts
// between currencies with mid prices.
type priceBook struct {
	src  PriceSource
	memo map[string]*quote // nil entry: not quotable
}

func newPriceBook(src PriceSource) *priceBook {
	return &priceBook{src: src, memo: make(map[string]*quote)}
}

func (b *priceBook) quote(symbol string) (quote, bool) {
	q, seen := b.memo[symbol]
	if !seen {
		if b.src != nil {
			if bid, ask, ok := b.src.Quote(symbol); ok && bid.IsPositive() && ask.GreaterThanOrEqual(bid) {
				q = &quote{bid, ask}
			}
		}
		b.memo[symbol] = q
	}
	if q == nil {
		return quote{}, false
	}
	return *q, true
}

// rate is the price of one unit of from in to, from the direct or the inverse pair.
func (b *priceBook) rate(from, to string) (decimal.Decimal, bool) {
	if from == to {
		return decimal.NewFromInt(1), true
	}
	if q, ok := b.quote(from + to); ok {
		return q.mid(), true
	}
	if q, ok := b.quote(to + from); ok {
		return decimal.NewFromInt(1).Div(q.mid()), true
	}
	return decimal.Decimal{}, false
}

// convert turns amount in currency from into currency to, directly or through USD. A venue
// needs no exactness here: a currency it cannot price at all is counted one to one.
func (b *priceBook) convert(amount decimal.Decimal, from, to string) decimal.Decimal {
	if r, ok := b.rate(from, to); ok {
		return amount.Mul(r)
	}
	r1, ok1 := b.rate(from, "USD")
	r2, ok2 := b.rate("USD", to)
	if ok1 && ok2 {
		return amount.Mul(r1).Mul(r2)
	}
	return amount
}

// Snapshot reads src once for a round of several symbols: a source whose Quote is expensive
// (FeedControlPrices reads the whole feed state per call) is read once and the snapshot
// returned; any other source is returned as it is. The bundled FIX venue's market data polls
// through it.
func Snapshot(ctx context.Context, src PriceSource) (PriceSource, error) {
	if snap, ok := src.(snapshotSource); ok {
		return snap.snapshot(ctx)
	}
	return src, nil
}
