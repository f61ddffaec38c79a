package risk

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/tick"
)

// BenchmarkTrailingTick is the tick path on one symbol holding 100,000 open trailing stops
// against the same symbol holding 100,000 plain stop losses, in one run (docs/orders.md,
// «Trailing stops»): each iteration sends the same tick to a desk of each kind and times them
// apart; ratio is trailing ÷ plain over the means, ratio-p50 over the medians. Nothing fires; the stops sit 0.5–1 % from the market.
//
// market=rising makes every tick a new high: the worst case for trails, all of which move on
// every tick (the whole group, in O(1)), while the plain stops move never. market=walk is a
// bounded random walk, new highs now and then. The 1,000 accounts of benchDesk hold the
// positions, so the tick also marks what the plain desk marks.
//
//	go test -run '^$' -bench BenchmarkTrailingTick -benchtime 200000x ./internal/risk/
func BenchmarkTrailingTick(b *testing.B) {
	const n = 100_000
	for _, market := range []string{"rising", "walk"} {
		b.Run(fmt.Sprintf("stops=%d/market=%s", n, market), func(b *testing.B) {
			plain := trailDesk(b, n, false)
			trailing := trailDesk(b, n, true)
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(3, 9))
			bid := 1.0
			var tPlain, tTrail time.Duration
			// Per-tick times, for medians: a shared machine's noise moves the means of two runs
			// apart more than it moves their medians.
			latPlain, latTrail := make([]time.Duration, 0, 1<<17), make([]time.Duration, 0, 1<<17)
			before := trailing.Stats().ClosesQueued + plain.Stats().ClosesQueued
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if market == "rising" {
					bid += 1e-9
				} else {
					bid = min(1.002, max(0.998, bid+float64(rng.IntN(3)-1)*0.00002))
				}
				u := tick.Update{Symbol: burstSymbol, Quote: tick.Quote{Bid: bid, Ask: bid + 0.0001}}
				t0 := time.Now()
				plain.onTick(ctx, u, t0)
				t1 := time.Now()
				trailing.onTick(ctx, u, t1)
				t2 := time.Now()
				tTrail += t2.Sub(t1)
				tPlain += t1.Sub(t0)
				if len(latPlain) < cap(latPlain) {
					latPlain, latTrail = append(latPlain, t1.Sub(t0)), append(latTrail, t2.Sub(t1))
				}
			}
			b.StopTimer()
			if after := trailing.Stats().ClosesQueued + plain.Stats().ClosesQueued; after != before {
				b.Fatalf("%d closes queued: the benchmark's stops must not fire", after-before)
			}
			b.ReportMetric(float64(tPlain.Nanoseconds())/float64(b.N), "plain-ns/tick")
			b.ReportMetric(float64(tTrail.Nanoseconds())/float64(b.N), "trailing-ns/tick")
			b.ReportMetric(float64(tTrail)/float64(tPlain), "ratio")
			slices.Sort(latPlain)
			slices.Sort(latTrail)
			p50p, p50t := latPlain[len(latPlain)/2], latTrail[len(latTrail)/2]
			b.ReportMetric(float64(p50p.Nanoseconds()), "plain-p50-ns")
			b.ReportMetric(float64(p50t.Nanoseconds()), "trailing-p50-ns")
			b.ReportMetric(float64(p50t)/float64(p50p), "ratio-p50")
			trailing.mu.Lock()
			bk := trailing.books[trailing.bookBySym[burstSymbol]]
			b.ReportMetric(float64(bk.buyTrail.byAnchor.Len()), "trail-groups")
			trailing.mu.Unlock()
		})
	}
}

// trailDesk is benchDesk's accounts and instruments with n BUY positions on the burst symbol,
// each with a stop loss (trail false) or a trailing stop (trail true) 0.5–1 % under the bid of
// 1, spread over the accounts. Half the trails are set at the market; half carry a level a
// previous holder stored from one of 200 high-water marks up to 0.2 % higher (its groups), so
// the desk starts with 200 groups the market merges as it climbs.
func trailDesk(b *testing.B, n int, trail bool) *Engine {
	snap, prices, _ := benchDesk(0, 0, 1e9)
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range n {
		d := float64(500+rng.IntN(500)) / 1e5 // on EURUSD's grid, as every stored distance is
		p := Position{ID: int64(i + 1), AccountID: int64(rng.IntN(benchAccounts) + 1), Symbol: burstSymbol, Side: Buy,
			Volume: 0.1, OpenPrice: 1}
		if !trail {
			p.SL = 1 - d
		} else {
			p.TrailDistance, p.TrailLevel = d, 1-d
			if i%2 == 1 {
				p.TrailLevel = math.Round((1+float64(rng.IntN(200))/1e5-d)*1e5) / 1e5
			}
		}
		snap.Positions = append(snap.Positions, p)
	}
	e, _ := startBench(b, snap, prices, benchExec{}, nil)
	return e
}
