package risk

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// benchPrices is lock-free like the tick engine's LastTick: a fixed map of atomic slots.
type benchPrices map[string]*atomic.Pointer[tick.Quote]

func (p benchPrices) LastTick(s string) (tick.Quote, bool) {
	if c := p[s]; c != nil {
		if q := c.Load(); q != nil {
			return *q, true
		}
	}
	return tick.Quote{}, false
}

func (benchPrices) SymbolState(string) tick.State { return tick.Quoting }

func (p benchPrices) set(s string, bid, ask float64) tick.Update {
	q := &tick.Quote{Bid: bid, Ask: ask, ReceivedAt: time.Now()}
	p[s].Store(q)
	return tick.Update{Symbol: s, Quote: *q}
}

// benchExec answers every call at once, or after holding "the connection" for latency.
type benchExec struct{ latency time.Duration }

func (x benchExec) Close(context.Context, int64, int64, fx.CloseReason, tick.Quote) error {
	if x.latency > 0 {
		time.Sleep(x.latency) // stands for the transaction; not synchronisation
	}
	return nil
}

func (x benchExec) StopOut(ctx context.Context, id, account int64, at tick.Quote, _ StopOut) error {
	return x.Close(ctx, id, account, fx.CloseStopOut, at)
}

func (x benchExec) Fill(context.Context, int64, tick.Quote) error { return nil }

const (
	benchSymbols        = 500
	benchAccounts       = 1000
	benchSymbolsPerAcct = 10
	benchWorkers        = 32 // store.Open's SetMaxOpenConns
	burstSymbol         = "BRSUSD"
)

// desk builds the benchmark desk: 500 symbols (EURUSD, GBPUSD, USDJPY as hub legs, the burst
// symbol, and synthetic pairs quoted in USD, JPY, EUR and GBP), 1,000 accounts in USD, EUR, GBP
// and JPY each trading 10 symbols, and positions spread over them with SL and TP 5–10 % away,
// plus burst positions on one symbol whose SLs all sit within 1 % under the price. Each account
// holds balanceUSD, in its own currency.
func benchDesk(positions, burst int, balanceUSD float64) (Snapshot, benchPrices, []string) {
	rng := rand.New(rand.NewPCG(7, 11))
	s := Snapshot{}
	prices := benchPrices{}
	add := func(sym, base, quote string, px float64) {
		s.Instruments = append(s.Instruments, Instrument{Symbol: sym, Base: base, Quote: quote, ContractSize: 100_000,
			LeverageMax: 500, HedgedMarginRate: 0.5})
		prices[sym] = &atomic.Pointer[tick.Quote]{}
		prices.set(sym, px, px*1.0001)
	}
	add("EURUSD", "EUR", "USD", 1.1)
	add("GBPUSD", "GBP", "USD", 1.3)
	add("USDJPY", "USD", "JPY", 150)
	add(burstSymbol, "BRS", "USD", 1)
	quotes := []string{"USD", "USD", "JPY", "EUR", "GBP"}
	var plain []string // symbols that are nobody's conversion leg
	for i := 0; len(s.Instruments) < benchSymbols; i++ {
		base := string([]byte{'Q', byte('A' + i/26%26), byte('A' + i%26)})
		quote := quotes[i%len(quotes)]
		px := 1.0
		if quote == "JPY" {
			px = 100
		}
		add(base+quote, base, quote, px)
		plain = append(plain, base+quote)
	}
	ccys := []string{"USD", "USD", "EUR", "GBP", "JPY"}
	perUSD := map[string]float64{"USD": 1, "EUR": 1 / 1.1, "GBP": 1 / 1.3, "JPY": 150}
	held := make([][]string, benchAccounts)
	for a := range benchAccounts {
		ccy := ccys[a%len(ccys)]
		s.Accounts = append(s.Accounts, Account{ID: int64(a + 1), Currency: ccy, Balance: balanceUSD * perUSD[ccy], Leverage: 100,
			MarginCallLevel: 100, StopOutLevel: 50})
		for _, k := range rng.Perm(len(s.Instruments)) {
			if sym := s.Instruments[k].Symbol; sym != burstSymbol && len(held[a]) < benchSymbolsPerAcct {
				held[a] = append(held[a], sym)
			}
		}
	}
	var id int64
	open := func(acct int, sym string, side Side, sl, tp float64) {
		id++
		q, _ := prices.LastTick(sym)
		s.Positions = append(s.Positions, Position{ID: id, AccountID: int64(acct + 1), Symbol: sym, Side: side, Volume: 0.1,
			OpenPrice: q.Bid, SL: sl, TP: tp})
	}
	for range positions {
		a := rng.IntN(benchAccounts)
		sym := held[a][rng.IntN(len(held[a]))]
		q, _ := prices.LastTick(sym)
		far := 1 + 0.05 + 0.05*rng.Float64()
		if rng.IntN(2) == 0 {
			open(a, sym, Buy, q.Bid/far, q.Bid*far)
		} else {
			open(a, sym, Sell, q.Ask*far, q.Ask/far)
		}
	}
	for range burst {
		open(rng.IntN(benchAccounts), burstSymbol, Buy, 1-0.01*rng.Float64(), 0)
	}
	return s, prices, plain
}

func startBench(b *testing.B, snap Snapshot, prices benchPrices, exec Executor, observe func(time.Duration)) (*Engine, chan tick.Update) {
	b.Helper()
	updates := make(chan tick.Update, 1024)
	e, err := New(Config{Loader: loaderFunc(func(context.Context) (Snapshot, error) { return snap, nil }), Prices: prices,
		Updates: updates, Executor: exec, Gate: realGate(b, &gatetest.Lease{}, nil, nil), Workers: benchWorkers, Observe: observe})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	<-e.Ready()
	return e, updates
}

// BenchmarkBurst: one gap tick on one symbol fires every SL there at once (200, as on an
// average symbol of this desk, and 5,000 as in the tracker issue), with 100,000 other open
// positions watched. Own time runs from the tick's arrival in Run to the moment a worker hands
// the close to the executor. With exec=0 the executor answers at once, so own time is the
// engine's alone; with exec=1ms each close holds one of the 32 workers ("connections") for 1 ms,
// and the tail is the queue behind them.
func BenchmarkBurst(b *testing.B) {
	for _, tc := range []struct {
		burst   int
		latency time.Duration
	}{{200, 0}, {5000, 0}, {200, time.Millisecond}, {5000, time.Millisecond}} {
		b.Run(fmt.Sprintf("closes=%d/exec=%v", tc.burst, tc.latency), func(b *testing.B) {
			snap, prices, _ := benchDesk(100_000, tc.burst, 1e9)
			var burstPos []Position
			for _, p := range snap.Positions {
				if p.Symbol == burstSymbol {
					burstPos = append(burstPos, p)
				}
			}
			var (
				mu      sync.Mutex
				samples []time.Duration
				want    int
				all     = make(chan struct{}, 1)
			)
			observe := func(d time.Duration) {
				mu.Lock()
				samples = append(samples, d)
				if len(samples) == want {
					all <- struct{}{}
				}
				mu.Unlock()
			}
			samples = make([]time.Duration, 0, b.N*len(burstPos))
			e, updates := startBench(b, snap, prices, benchExec{latency: tc.latency}, observe)
			ctx := context.Background()
			var busy time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if i > 0 {
					prices.set(burstSymbol, 1, 1.0001)
					changes := make([]Change, len(burstPos))
					for k, p := range burstPos {
						changes[k] = Change{Kind: PositionOpened, Position: p}
					}
					e.Apply(ctx, changes...)
				}
				mu.Lock()
				want = len(samples) + len(burstPos)
				mu.Unlock()
				u := prices.set(burstSymbol, 0.95, 0.9501) // the gap
				b.StartTimer()
				start := time.Now()
				updates <- u
				<-all
				e.work.waitIdle()
				busy += time.Since(start)
			}
			b.StopTimer()
			if n := e.Stats().Positions; n != 100_000 {
				b.Fatalf("%d positions left watched, want the 100,000 untriggered", n)
			}
			slices.Sort(samples)
			pct := func(p float64) float64 {
				return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds())
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(float64(samples[len(samples)-1].Microseconds()), "max-µs")
			b.ReportMetric(float64(len(samples))/busy.Seconds(), "closes/s")
		})
	}
}

// BenchmarkUntriggeredTick: ticks that fire nothing, on symbols that are nobody's conversion
// leg, cycling over 100 of them; then on EURUSD, the leg every EUR account depends on. The desk
// has 1,000 accounts each trading 10 symbols; the second size holds 10× the positions on the
// same accounts and symbols, so a cost that grew with untriggered positions would show there.
//
// Accounts hold a balance far beyond their margin (balance=far: every account's band is the
// widest and no tick re-marks one), $11,000 (balance=near: the most loaded accounts around a
// 120 % level) or $9,000 (balance=atcall: the most loaded accounts at their margin-call level, a
// few of them past it). The nearer the levels, the narrower the bands and the more accounts a
// tick re-marks — marked/tick says how many, at about 2 µs each. With every exposed account
// re-marked on every tick, as before bands, an EURUSD tick cost about 240 µs at p50.
func BenchmarkUntriggeredTick(b *testing.B) {
	for _, tc := range []struct {
		positions int
		balance   string
		usd       float64
	}{{100_000, "far", 1e9}, {100_000, "near", 11_000}, {100_000, "atcall", 9_000}, {1_000_000, "far", 1e9}} {
		n := tc.positions
		snap, prices, plain := benchDesk(n, 0, tc.usd)
		e, _ := startBench(b, snap, prices, benchExec{}, nil)
		ctx := context.Background()
		for _, leg := range []bool{false, true} {
			name := fmt.Sprintf("positions=%d/balance=%s/symbol=plain", n, tc.balance)
			syms := plain[:100]
			if leg {
				name = fmt.Sprintf("positions=%d/balance=%s/symbol=EURUSD", n, tc.balance)
				syms = []string{"EURUSD"}
			}
			b.Run(name, func(b *testing.B) {
				ups := make([]tick.Update, 0, 2*len(syms))
				for _, s := range syms {
					q, _ := prices.LastTick(s)
					for _, f := range []float64{1.001, 0.999} { // ±0.1 %: far from every stop
						ups = append(ups, tick.Update{Symbol: s, Quote: tick.Quote{Bid: q.Bid * f, Ask: q.Ask * f}})
					}
				}
				lat := make([]time.Duration, 0, 1<<16)
				before := e.Stats()
				e.mu.Lock()
				marksBefore := e.marks
				e.mu.Unlock()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					u := ups[i%len(ups)]
					t0 := time.Now()
					e.onTick(ctx, u, t0)
					if len(lat) < cap(lat) {
						lat = append(lat, time.Since(t0))
					}
				}
				b.StopTimer()
				if s := e.Stats(); s.ClosesQueued != before.ClosesQueued || s.FillsQueued != before.FillsQueued {
					b.Fatal("an untriggered tick queued work")
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
				b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
				e.mu.Lock()
				exposed := 0
				for _, s := range syms {
					exposed += e.books[e.bookBySym[s]].lo.Len()
				}
				marked := e.marks - marksBefore
				e.mu.Unlock()
				b.ReportMetric(float64(exposed)/float64(len(syms)), "accounts/tick")
				b.ReportMetric(float64(marked)/float64(b.N), "marked/tick")
			})
		}
	}
}

// BenchmarkSweep is what one full sweep holds the engine for — the boot, lease_restored and
// updates_dropped sweeps — with nothing triggered: every position, order and account evaluated
// at current prices. The updates_dropped sweep runs at most once per DropCheck (1 s).
//
//	go test -run '^$' -bench BenchmarkSweep -benchtime 20x ./internal/risk/
func BenchmarkSweep(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("positions=%d", n), func(b *testing.B) {
			snap, prices, _ := benchDesk(n, 0, 1e9)
			e, _ := startBench(b, snap, prices, benchExec{}, nil)
			ctx := context.Background()
			queued := e.Stats().ClosesQueued
			for b.Loop() {
				e.Sweep(ctx, SweepUpdatesDropped)
			}
			if got := e.Stats().ClosesQueued; got != queued {
				b.Fatalf("a sweep at unchanged prices queued %d closes", got-queued)
			}
		})
	}
}

// BenchmarkBuildView is a holder's install of its view as a streamed load hands it over
// (StreamLoader): the terms, the accounts, then 50,000 positions in batches of 1,024 — the part of
// a boot that runs beside the open positions' read (docs/boot.md, «The risk view's read»).
//
//	go test -run '^$' -bench BuildView -benchmem ./internal/risk/
func BenchmarkBuildView(b *testing.B) {
	snap, _, _ := benchDesk(50_000, 0, 1e9)
	for b.Loop() {
		v := newViewBuilder()
		v.AddTerms(snap.Instruments, snap.Groups)
		v.AddAccounts(snap.Accounts)
		for ps := snap.Positions; len(ps) > 0; {
			n := min(1024, len(ps))
			v.AddPositions(ps[:n])
			ps = ps[n:]
		}
	}
	b.ReportMetric(float64(len(snap.Positions))*float64(b.N)/b.Elapsed().Seconds(), "positions/s")
}
