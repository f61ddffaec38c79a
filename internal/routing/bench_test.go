package routing

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// BenchmarkRoute is one order asked against ten rules none of which matches — symbols, accounts,
// volumes and profile conditions — the most a rule list costs an order before the group's mode
// routes it.
//
//	go test -run '^$' -bench BenchmarkRoute -benchmem ./internal/routing/
func BenchmarkRoute(b *testing.B) {
	rules := []Rule{
		{ID: 1, Symbols: []string{"GBPUSD"}, Action: ABook},
		{ID: 2, Symbols: []string{"USDJPY", "AUDUSD"}, Action: ABook},
		{ID: 3, Accounts: []int64{1, 2, 3}, Action: ABook},
		{ID: 4, VolumeMin: d("50"), Action: ABook},
		{ID: 5, VolumeMax: d("0.005"), Action: ABook},
		{ID: 6, Symbols: []string{"EURUSD"}, VolumeMin: d("10"), Action: ABook},
		{ID: 7, MinTrades: n(20), ProfitFactorMin: d("1.5"), Action: ABook},
		{ID: 8, WinRateMin: d("60"), Action: ABook},
		{ID: 9, AvgHoldSecondsMax: d("60"), UnderMinuteShareMin: d("50"), Action: ABook},
		{ID: 10, Symbols: []string{"EURUSD"}, ProfitFactorMin: d("5"), Action: ABook},
	}
	p := Profile{GrossProfit: decimal.Zero, GrossLoss: decimal.Zero}
	for range 25 {
		p = p.Add(Trade(decimal.NewFromInt(10), 90*time.Second))
		p = p.Add(Trade(decimal.NewFromInt(-8), 120*time.Second))
	}
	o := Order{AccountID: 7, Symbol: "EURUSD", Volume: decimal.RequireFromString("0.01"), Default: BBook}
	b.ReportAllocs()
	for b.Loop() {
		if a, id := Route(rules, o, p); a != BBook || id != 0 {
			b.Fatalf("routed %s by %d", a, id)
		}
	}
}
