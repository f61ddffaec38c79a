package trading

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/book"
	"fxdesk/internal/lease"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
)

// gapPrices quotes every seeded symbol from fixedPrices until gapped is set; from then on sym
// answers the gap quote. The boot sweep must see the normal market, the burst the gap.
type gapPrices struct {
	fixedPrices
	sym    string
	gap    [2]float64
	gapped atomic.Bool
}

func (p *gapPrices) LastTick(s string) (tick.Quote, bool) {
	if s == p.sym && p.gapped.Load() {
		return tick.Quote{Bid: p.gap[0], Ask: p.gap[1], ReceivedAt: time.Now()}, true
	}
	return p.fixedPrices.LastTick(s)
}

// usdValue is one unit of each seeded currency in USD; a symbol's mid is base/quote.
var usdValue = map[string]float64{
	"USD": 1, "EUR": 1.10, "GBP": 1.30, "JPY": 1 / 150.0, "CHF": 1 / 0.88, "CAD": 1 / 1.36, "AUD": 0.66, "NZD": 0.60,
	"SEK": 1 / 10.5, "NOK": 1 / 10.7, "MXN": 1 / 17.0, "ZAR": 1 / 18.5, "SGD": 1 / 1.34, "HKD": 1 / 7.8, "CNH": 1 / 7.2,
	"PLN": 1 / 4.0, "XAU": 2000, "XAG": 25,
}

// BenchmarkRiskBurstCommitted is a gap's burst of closes committed for real: the risk engine in
// process with RiskDesk as its loader and executor, every close one fenced transaction
// (ClosePosition under a real lease.Keeper: the fence's LOCK IN SHARE MODE read included)
// against MariaDB on a pool of 32 connections, with as many workers as cmd/web gives the engine
// (book.MaxWaiting: a close waits for its group commit without holding a connection, and a full
// batch can queue while one commits).
//
// The desk: 1,000 USD accounts with one DEPOSIT each; 100,000 OPEN positions (with their FILLED
// MARKET orders) — 95,000 spread round-robin over all the migration's instruments (38, not the
// issue's 500: the catalog is what the executor prices against) with SL and TP 5–10 % away, and
// 5,000 BUYs on EURUSD opened at 1.10000 whose SLs sit within 1 % below. One gap tick on EURUSD
// (bid 1.07800, −2 %) fires all 5,000. Own time is the engine's (tick arrival → handed to the
// executor); closes/s is 5,000 over the time from pushing the tick to the last commit. Then the
// ledger is checked: one PROFIT deal per closed position, Σ deals = balance on every account.
//
//	FXDESK_BENCH=1 go test -run '^$' -bench BenchmarkRiskBurstCommitted -benchtime 1x ./internal/trading/
//
// The burst runs with GOMAXPROCS=1, as docs/operations.md advises for a web process sharing a small
// machine with MariaDB; FXDESK_BENCH_GOMAXPROCS=0 keeps Go's default. Each call seeds a fresh
// database and measures one burst; run it with -benchtime 1x.
func BenchmarkRiskBurstCommitted(b *testing.B) {
	dbtest.SkipUnlessBench(b, "committed burst")
	const (
		accounts  = 1000
		positions = 100_000
		burst     = 5000
		burstSym  = "EURUSD"
		pool      = 32 // store.Open's SetMaxOpenConns
		workers   = book.MaxWaiting
	)
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, dropDB, err := dbtest.NewMigrated("riskburst")
	if err != nil {
		b.Fatal(err)
	}
	defer dropDB()
	if n := db.Stats().MaxOpenConnections; n != pool {
		b.Fatalf("pool holds %d connections, the benchmark assumes %d", n, pool)
	}

	// The lease: a real keeper, so Fence is the holder's statement in every close.
	rs, err := dbtest.StartRedis()
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	keeper := lease.New(db, rdb, lease.Config{TTL: 30 * time.Second, Fence: 5 * time.Second, Hostname: "bench", PID: os.Getpid()},
		slog.New(slog.DiscardHandler))
	if won, err := keeper.Claim(ctx); !won || err != nil {
		b.Fatalf("lease claim: won=%v err=%v", won, err)
	}
	keeperDone := make(chan struct{})
	go func() { keeper.Run(ctx); close(keeperDone) }()
	defer func() { cancel(); <-keeperDone; keeper.Release(context.Background()) }()

	// Prices for every seeded instrument, and the seed.
	prices := &gapPrices{fixedPrices: fixedPrices{}, sym: burstSym, gap: [2]float64{1.07800, 1.07820}}
	rows, err := db.QueryContext(ctx, "SELECT `symbol`, `base`, `quote`, `digits` FROM `fx_instrument` ORDER BY `symbol`")
	if err != nil {
		b.Fatal(err)
	}
	var syms []string
	for rows.Next() {
		var sym, base, quote string
		var digits int
		if err := rows.Scan(&sym, &base, &quote, &digits); err != nil {
			b.Fatal(err)
		}
		bv, qv := usdValue[base], usdValue[quote]
		if bv == 0 || qv == 0 {
			b.Fatalf("no USD value for %s", sym)
		}
		scale := math.Pow10(digits)
		bid := math.Round(bv/qv*scale) / scale
		prices.fixedPrices[sym] = [2]float64{bid, bid + 2/scale}
		syms = append(syms, sym)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	prices.fixedPrices[burstSym] = [2]float64{1.10000, 1.10002}

	seedStart := time.Now()
	insert := func(head string, n int, row func(i int) string) {
		const chunk = 2000
		var sb strings.Builder
		for lo := 0; lo < n; lo += chunk {
			sb.Reset()
			sb.WriteString(head)
			for i := lo; i < min(n, lo+chunk); i++ {
				if i > lo {
					sb.WriteByte(',')
				}
				sb.WriteString(row(i))
			}
			if _, err := db.ExecContext(ctx, sb.String()); err != nil {
				b.Fatalf("seed: %v", err)
			}
		}
	}
	const balance = "1000000.00"
	insert("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES ", accounts, func(i int) string {
		return fmt.Sprintf("(%d,%d,'USD',100,%s)", i+1, 100_000+i, balance)
	})
	insert("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`, `comment`) VALUES ",
		accounts, func(i int) string {
			return fmt.Sprintf("(%d,'DEPOSIT',%s,%s,'USD','deposit:bench:%d','seed')", i+1, balance, balance, i+1)
		})
	type seedPos struct {
		acct         int
		sym, side    string
		open, sl, tp float64
	}
	rng := rand.New(rand.NewPCG(5, 9))
	seeded := make([]seedPos, positions)
	for i := range seeded {
		if i < burst {
			seeded[i] = seedPos{acct: i%accounts + 1, sym: burstSym, side: "BUY", open: 1.10002, sl: 1.1 * (1 - 0.01*rng.Float64())}
			continue
		}
		sym := syms[i%len(syms)]
		q := prices.fixedPrices[sym]
		far := 1.05 + 0.05*rng.Float64()
		if rng.IntN(2) == 0 {
			seeded[i] = seedPos{acct: rng.IntN(accounts) + 1, sym: sym, side: "BUY", open: q[1], sl: q[0] / far, tp: q[0] * far}
		} else {
			seeded[i] = seedPos{acct: rng.IntN(accounts) + 1, sym: sym, side: "SELL", open: q[0], sl: q[1] * far, tp: q[1] / far}
		}
	}
	tpText := func(tp float64) string {
		if tp == 0 {
			return "NULL"
		}
		return fmt.Sprintf("%.10f", tp)
	}
	insert("INSERT INTO `fx_order` (`id`, `accountId`, `symbol`, `side`, `type`, `volume`, `sl`, `tp`, `status`, `fillPrice`) VALUES ",
		positions, func(i int) string {
			p := seeded[i]
			return fmt.Sprintf("(%d,%d,'%s','%s','MARKET',0.01,%.10f,%s,'FILLED',%.10f)", i+1, p.acct, p.sym, p.side, p.sl, tpText(p.tp), p.open)
		})
	insert("INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `sl`, `tp`) VALUES ",
		positions, func(i int) string {
			p := seeded[i]
			return fmt.Sprintf("(%d,%d,%d,'%s','%s',0.01,0.01,%.10f,%.10f,%s)", i+1, p.acct, i+1, p.sym, p.side, p.open, p.sl, tpText(p.tp))
		})
	b.Logf("seeded %d accounts, %d positions over %d symbols (%d on %s with an SL the gap crosses) in %v",
		accounts, positions, len(syms), burst, burstSym, time.Since(seedStart).Round(time.Millisecond))

	// The engine, wired as cmd/web wires it: the service reports its commits to Apply.
	var eng *risk.Engine
	g := newGate(b, keeper).g
	svc, err := New(Config{DB: db, Prices: prices, Lease: keeper, Gate: g,
		OnChange: func(ctx context.Context, ch ...risk.Change) { eng.Apply(ctx, ch...) }})
	if err != nil {
		b.Fatal(err)
	}
	runCommits(b, svc)
	var (
		mu       sync.Mutex
		own      = make([]time.Duration, 0, burst)
		results  = map[string]int{}
		finished = make(chan time.Time, 1)
	)
	rd := NewRiskDesk(svc, func(reason, result string) {
		mu.Lock()
		defer mu.Unlock()
		results[reason+"/"+result]++
		n := 0
		for _, c := range results {
			n += c
		}
		if n == burst {
			finished <- time.Now()
		}
	})
	updates := make(chan tick.Update, 1)
	eng, err = risk.New(risk.Config{Loader: rd, Prices: prices, Updates: updates, Executor: rd, Gate: g, Workers: workers,
		Log: slog.New(slog.DiscardHandler), Observe: func(d time.Duration) {
			mu.Lock()
			own = append(own, d)
			mu.Unlock()
		}})
	if err != nil {
		b.Fatal(err)
	}
	engCtx, stopEng := context.WithCancel(ctx)
	engDone := make(chan struct{})
	go func() { eng.Run(engCtx); close(engDone) }()
	defer func() { stopEng(); <-engDone }()
	loadStart := time.Now()
	select {
	case <-eng.Ready():
	case <-time.After(5 * time.Minute):
		b.Fatal("the risk engine did not load")
	}
	if s := eng.Stats(); s.Positions != positions || s.Accounts != accounts || s.ClosesQueued != 0 {
		b.Fatalf("engine view after boot: %+v", s)
	}
	b.Logf("engine loaded and swept in %v", time.Since(loadStart).Round(time.Millisecond))

	// The burst, with the engine's process on the processors docs/operations.md gives a web
	// process sharing a small machine with MariaDB, as here (FXDESK_BENCH_GOMAXPROCS, default 1;
	// 0 keeps Go's default).
	if procs := dbtest.BenchProcs(b); procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	}
	b.Logf("burst with GOMAXPROCS=%d", runtime.GOMAXPROCS(0))
	prices.gapped.Store(true)
	q, _ := prices.LastTick(burstSym)
	cpu0 := dbtest.ReadCPU()
	commits0 := svc.CommitStats().Batches
	b.StartTimer()
	start := time.Now()
	updates <- tick.Update{Symbol: burstSym, Quote: q}
	var end time.Time
	select {
	case end = <-finished:
	case <-time.After(5 * time.Minute):
		b.StopTimer()
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("burst not finished after 5 minutes: %v, engine %+v", results, eng.Stats())
	}
	b.StopTimer()
	elapsed := end.Sub(start)
	cpu := dbtest.ReadCPU().Sub(cpu0)

	// What was committed.
	mu.Lock()
	got := maps.Clone(results)
	samples := slices.Clone(own)
	mu.Unlock()
	if got["SL/closed"] != burst {
		b.Fatalf("executor results %v, want %d SL/closed", got, burst)
	}
	// Every burst position closed by SL at the gapped bid (or below it, by the markup), never at
	// its stop.
	var closed, closedBurst int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(`symbol` = ? AND `closeReason` = 'SL' AND `id` <= ? AND `closePrice` <= ?), 0) "+
		"FROM `fx_position` WHERE `status` = 'CLOSED'", burstSym, burst, prices.gap[0]).Scan(&closed, &closedBurst); err != nil {
		b.Fatal(err)
	}
	if closed != burst || closedBurst != burst {
		b.Fatalf("%d positions CLOSED (%d of them the burst's, by SL, at the gap), want %d", closed, closedBurst, burst)
	}
	profit := map[int64]int{}
	rows, err = db.QueryContext(ctx, "SELECT `positionId`, COUNT(*) FROM `fx_deal` WHERE `type` = 'PROFIT' GROUP BY `positionId`")
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			b.Fatal(err)
		}
		profit[id] = n
	}
	rows.Close()
	if len(profit) != burst {
		b.Fatalf("PROFIT deals name %d positions, want %d", len(profit), burst)
	}
	for id := int64(1); id <= burst; id++ {
		if profit[id] != 1 {
			b.Fatalf("position %d has %d PROFIT deals, want 1", id, profit[id])
		}
	}
	var touched, off int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(a.`balance` <> s.`total`), 0) FROM `fx_account` a "+
		"JOIN (SELECT `accountId`, SUM(`amount`) AS `total` FROM `fx_deal` GROUP BY `accountId`) s ON s.`accountId` = a.`id` "+
		"WHERE a.`id` IN (SELECT DISTINCT `accountId` FROM `fx_position` WHERE `status` = 'CLOSED')").Scan(&touched, &off); err != nil {
		b.Fatal(err)
	}
	if off != 0 || touched == 0 {
		b.Fatalf("Σ deals ≠ balance on %d of the %d accounts the burst touched", off, touched)
	}
	if s := eng.Stats(); s.Positions != positions-burst || s.ExecutorErrors != 0 || s.AlreadyClosed != 0 || s.StopOuts != 0 {
		b.Fatalf("engine after the burst: %+v", s)
	}

	slices.Sort(samples)
	pct := func(p float64) float64 {
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds())
	}
	b.ReportMetric(float64(burst)/elapsed.Seconds(), "closes/s")
	b.ReportMetric(pct(0.50), "own-p50-µs")
	b.ReportMetric(pct(0.99), "own-p99-µs")
	b.ReportMetric(float64(samples[len(samples)-1].Microseconds()), "own-max-µs")
	b.ReportMetric(float64(elapsed.Milliseconds()), "burst-ms")
	// Transactions the burst took: noise-free, unlike the rate (a full batch is book.MaxBatch).
	b.ReportMetric(float64(svc.CommitStats().Batches-commits0), "commits")
	// What each close cost in processor time, here and in the server: on this shared 2-core
	// machine the rate moves with the load, these much less.
	b.ReportMetric(float64(cpu.Self.Microseconds())/burst, "self-cpu-µs/close")
	b.ReportMetric(float64(cpu.Server.Microseconds())/burst, "db-cpu-µs/close")
	b.Logf("%d closes committed in %v (%d accounts touched, ledger balanced)", burst, elapsed.Round(time.Millisecond), touched)
}
