package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The price-source harness (docs/prices.md): one fxdesk-web quoting from two real fxdesk-feedsim
// processes, "primary" and "backup", started with the same -seed so that their walks quote the
// same market (the simulator's market-seed mode); each one killed, restarted and moved through
// its own control API.

// marketSeed is the -seed both simulators of a desk share: the same seed, the same market.
const marketSeed = "3838"

// marketWalk is how often each simulator quotes each symbol: short, so that the silence
// thresholds the desk derives from the tick rate are short too.
const marketWalk = "50ms"

// startMarketSim starts a walking simulator on addr ("127.0.0.1:0" for a free port).
func startMarketSim(t *testing.T, addr string) *feedSim {
	t.Helper()
	return startFeedSim(t, "-addr", addr, "-walk", marketWalk, "-seed", marketSeed)
}

// addr is the simulator's listen address, for a restart on the same one.
func (s *feedSim) addr() string { return strings.TrimPrefix(s.base, "http://") }

// priceDesk is one holder quoting EURUSD from a primary and a backup simulator.
type priceDesk struct {
	*tradingDesk
	primary, backup *feedSim
}

// priceEnv is the desk's price settings: a hold-down short enough for a test, the rest default.
const priceHoldDown = 2 * time.Second

// newPriceDesk starts both simulators and one fxdesk-web holding the lease that quotes from them
// in that order; env entries override the web process's environment.
func newPriceDesk(t *testing.T, env ...string) *priceDesk {
	t.Helper()
	e := newDeskEnv(t)
	primary, backup := startMarketSim(t, "127.0.0.1:0"), startMarketSim(t, "127.0.0.1:0")
	env = append([]string{
		"FXDESK_PRICE_SOURCES=primary=" + primary.url + ",backup=" + backup.url,
		"FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s",
		"FXDESK_PRICE_HOLD_DOWN=" + priceHoldDown.String(), "FXDESK_PRICE_ALERT_RESOLVE=2s",
	}, env...)
	web := e.start("web", "fxdesk-web", env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	d := &priceDesk{tradingDesk: &tradingDesk{e: e, sim: primary, web: web, admin: e.adminToken()}, primary: primary, backup: backup}
	waitRiskReady(web)
	d.waitActive("EURUSD", "primary", true)
	return d
}

// priceSources is GET /api/admin/fx/price-sources.
type priceSources struct {
	Sources []struct {
		Name      string `json:"name"`
		Connected bool   `json:"connected"`
		Accepted  uint64 `json:"accepted"`
		Held      uint64 `json:"held"`
		Dropped   uint64 `json:"dropped"`
		Published uint64 `json:"published"`
	} `json:"sources"`
	OffPrimary []string          `json:"offPrimary"`
	Symbols    []symbolSelection `json:"symbols"`
}

type symbolSelection struct {
	Symbol    string    `json:"symbol"`
	Source    string    `json:"source"`
	Since     time.Time `json:"since"`
	Failovers int       `json:"failovers"`
	Health    []struct {
		Source  string `json:"source"`
		Healthy bool   `json:"healthy"`
		Reason  string `json:"reason"`
	} `json:"health"`
}

func (d *priceDesk) priceSources() priceSources {
	d.e.t.Helper()
	var v priceSources
	must(d.e.t, d.web, d.admin, "GET", "/api/admin/fx/price-sources", "", http.StatusOK, &v)
	return v
}

// selection is symbol's selection now.
func (d *priceDesk) selection(symbol string) symbolSelection {
	d.e.t.Helper()
	for _, s := range d.priceSources().Symbols {
		if s.Symbol == symbol {
			return s
		}
	}
	d.e.t.Fatalf("price-sources shows no %s", symbol)
	return symbolSelection{}
}

// healthy says whether the selection reports source healthy.
func (s symbolSelection) healthy(source string) bool {
	for _, h := range s.Health {
		if h.Source == source {
			return h.Healthy
		}
	}
	return false
}

// waitActive polls the selection until symbol quotes from source (and, with allHealthy, every
// source is healthy). It is for the desk's state at start, which no line announces.
func (d *priceDesk) waitActive(symbol, source string, allHealthy bool) symbolSelection {
	d.e.t.Helper()
	var s symbolSelection
	eventually(d.e.t, 15*time.Second, 50*time.Millisecond, fmt.Sprintf("%s quoted from %s", symbol, source), func() bool {
		s = d.selection(symbol)
		if s.Source != source {
			return false
		}
		if allHealthy {
			for _, h := range s.Health {
				if !h.Healthy {
					return false
				}
			}
		}
		return true
	})
	return s
}

// isSwitch matches the holder's log line for symbol's switch to source.
func isSwitch(symbol, to string) func(logLine) bool {
	return func(l logLine) bool {
		return l["symbol"] == symbol && l["to"] == to && l["from"] != nil && l["from"] != to
	}
}

// rejectedTick is one entry of GET /api/admin/fx/price-sources/rejected.
type rejectedTick struct {
	Symbol  string `json:"symbol"`
	Source  string `json:"source"`
	Bid     any    `json:"bid"`
	Ask     any    `json:"ask"`
	Reason  string `json:"reason"`
	Outcome string `json:"outcome"`
}

func (d *priceDesk) rejected() []rejectedTick {
	d.e.t.Helper()
	var v struct {
		Rejected []rejectedTick `json:"rejected"`
	}
	must(d.e.t, d.web, d.admin, "GET", "/api/admin/fx/price-sources/rejected?limit=100", "", http.StatusOK, &v)
	return v.Rejected
}

// control posts a control request to sim, failing the test on an error.
func (s *feedSim) must(what, body string) {
	s.t.Helper()
	if err := s.control(what, body); err != nil {
		s.t.Fatal(err)
	}
}

// both posts the same control request to both simulators at once: a move of the market itself.
func (d *priceDesk) both(what, body string) {
	d.e.t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*feedSim{d.primary, d.backup} {
		wg.Go(func() { errs[i] = s.control(what, body) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			d.e.t.Fatal(err)
		}
	}
}

// railQuote is one quote the desk published on its markets rail, stamped when the test read it.
type railQuote struct {
	Symbol   string
	Bid, Ask decimal.Decimal
	Source   string // the source the quote came from, where the rail says
	At       time.Time
}

// priceRail is an open markets rail whose quotes a reader hands over as they arrive.
type priceRail struct {
	t      *testing.T
	quotes chan railQuote
}

// rail subscribes to symbol's published quotes as the admin until the test ends.
func (d *priceDesk) rail(symbol string) *priceRail {
	t := d.e.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.web.addr+"/api/fx/markets/stream?symbols="+symbol, nil)
	req.Header.Set("Authorization", "Bearer "+d.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("markets rail = %d", resp.StatusCode)
	}
	r := &priceRail{t: t, quotes: make(chan railQuote, 100000)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	go func() {
		defer close(done)
		defer close(r.quotes)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			at := time.Now()
			var ev struct{ Symbol, Bid, Ask, Source string }
			if json.Unmarshal([]byte(data), &ev) != nil || ev.Bid == "" || ev.Ask == "" {
				continue
			}
			q := railQuote{Symbol: ev.Symbol, Source: ev.Source, At: at}
			q.Bid, _ = decimal.NewFromString(ev.Bid)
			q.Ask, _ = decimal.NewFromString(ev.Ask)
			select {
			case r.quotes <- q:
			default: // a test that stops reading does not block the reader
			}
		}
	}()
	return r
}

// next waits for the next published quote matching pred.
func (r *priceRail) next(timeout time.Duration, what string, pred func(railQuote) bool) railQuote {
	r.t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case q, ok := <-r.quotes:
			if !ok {
				r.t.Fatalf("the markets rail ended waiting for %s", what)
			}
			if pred(q) {
				return q
			}
		case <-deadline.C:
			r.t.Fatalf("no published quote %s within %s", what, timeout)
		}
	}
}

// latest drains what has arrived and returns the newest quote, waiting for one if none has.
func (r *priceRail) latest() railQuote {
	r.t.Helper()
	q := r.next(5*time.Second, "at all", func(railQuote) bool { return true })
	for {
		select {
		case n, ok := <-r.quotes:
			if !ok {
				return q
			}
			q = n
		default:
			return q
		}
	}
}

// pips is n EURUSD pips.
func pips(n int64) decimal.Decimal { return decimal.New(n, -4) }
