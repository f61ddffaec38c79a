package routing

import (
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func d(s string) *decimal.Decimal { v := decimal.RequireFromString(s); return &v }
func n(v int64) *int64            { return &v }

// profile builds a profile from trades of (profit, seconds held).
func profile(trades ...[2]string) Profile {
	p := Profile{GrossProfit: decimal.Zero, GrossLoss: decimal.Zero}
	for _, t := range trades {
		secs := decimal.RequireFromString(t[1])
		p = p.Add(Trade(decimal.RequireFromString(t[0]), time.Duration(secs.Mul(decimal.NewFromInt(1000)).IntPart())*time.Millisecond))
	}
	return p
}

// Each case is one condition at its edge, or the order of rules: the first match wins and
// nothing matching leaves the group's default.
func TestRoute(t *testing.T) {
	t.Parallel()
	order := Order{AccountID: 7, Symbol: "EURUSD", Volume: decimal.RequireFromString("5"), Default: BBook}
	// A winner: 3 trades, 2 wins (+30, +20), one loss (−10): PF 5, win rate 66.67 %,
	// held 10 s, 50 s, 200 s: average 86.667 s, 2 of 3 under a minute.
	winner := profile([2]string{"30", "10"}, [2]string{"20", "50"}, [2]string{"-10", "200"})
	cases := []struct {
		name   string
		rules  []Rule
		order  Order
		p      Profile
		action Action
		rule   int64
	}{
		{"no rules: the group's default", nil, order, Profile{}, BBook, 0},
		{"no rules on an EXTERNAL group", nil, Order{AccountID: 7, Symbol: "EURUSD", Volume: decimal.NewFromInt(1), Default: ABook}, Profile{}, ABook, 0},
		{"a rule with no condition matches everything", []Rule{{ID: 1, Action: ABook}}, order, Profile{}, ABook, 1},
		{"volume ≥ 5 matches 5", []Rule{{ID: 2, VolumeMin: d("5"), Action: ABook}}, order, Profile{}, ABook, 2},
		{"volume ≥ 5 does not match 4.99", []Rule{{ID: 2, VolumeMin: d("5"), Action: ABook}}, Order{AccountID: 7, Symbol: "EURUSD", Volume: decimal.RequireFromString("4.99"), Default: BBook}, Profile{}, BBook, 0},
		{"volume ≤ 5 matches 5", []Rule{{ID: 3, VolumeMax: d("5"), Action: ABook}}, order, Profile{}, ABook, 3},
		{"volume ≤ 4.99 does not match 5", []Rule{{ID: 3, VolumeMax: d("4.99"), Action: ABook}}, order, Profile{}, BBook, 0},
		{"account listed", []Rule{{ID: 4, Accounts: []int64{3, 7}, Action: ABook}}, order, Profile{}, ABook, 4},
		{"account not listed", []Rule{{ID: 4, Accounts: []int64{3, 8}, Action: ABook}}, order, Profile{}, BBook, 0},
		{"symbol listed", []Rule{{ID: 5, Symbols: []string{"GBPUSD", "EURUSD"}, Action: ABook}}, order, Profile{}, ABook, 5},
		{"symbol not listed", []Rule{{ID: 5, Symbols: []string{"GBPUSD"}, Action: ABook}}, order, Profile{}, BBook, 0},
		{"every condition must hold", []Rule{{ID: 6, Symbols: []string{"EURUSD"}, VolumeMin: d("10"), Action: ABook}}, order, Profile{}, BBook, 0},
		{"first match wins", []Rule{{ID: 7, VolumeMin: d("10"), Action: ABook}, {ID: 8, VolumeMin: d("1"), Action: BBook}, {ID: 9, Action: ABook}}, order, Profile{}, BBook, 8},
		{"B_BOOK rule on an EXTERNAL group", []Rule{{ID: 10, Symbols: []string{"EURUSD"}, Action: BBook}}, Order{AccountID: 7, Symbol: "EURUSD", Volume: decimal.NewFromInt(1), Default: ABook}, Profile{}, BBook, 10},
		{"profit factor 5 ≥ 5", []Rule{{ID: 11, ProfitFactorMin: d("5"), Action: ABook}}, order, winner, ABook, 11},
		{"profit factor 5 < 5.01", []Rule{{ID: 11, ProfitFactorMin: d("5.01"), Action: ABook}}, order, winner, BBook, 0},
		{"profit factor unbounded (no loss) matches", []Rule{{ID: 12, ProfitFactorMin: d("100"), Action: ABook}}, order, profile([2]string{"1", "5"}), ABook, 12},
		{"profit factor of break-even trades does not match", []Rule{{ID: 12, ProfitFactorMin: d("0"), Action: ABook}}, order, profile([2]string{"0", "5"}), BBook, 0},
		{"a profile condition needs a closed trade", []Rule{{ID: 13, ProfitFactorMin: d("0"), Action: ABook}}, order, Profile{}, BBook, 0},
		{"minTrades 3 with 3 trades", []Rule{{ID: 14, MinTrades: n(3), ProfitFactorMin: d("1.5"), Action: ABook}}, order, winner, ABook, 14},
		{"minTrades 4 with 3 trades", []Rule{{ID: 14, MinTrades: n(4), ProfitFactorMin: d("1.5"), Action: ABook}}, order, winner, BBook, 0},
		{"win rate 66.67 ≥ 66.66", []Rule{{ID: 15, WinRateMin: d("66.66"), Action: ABook}}, order, winner, ABook, 15},
		{"win rate 66.67 < 66.67", []Rule{{ID: 15, WinRateMin: d("66.67"), Action: ABook}}, order, winner, BBook, 0},
		{"average hold 86.667 s is under 86.7", []Rule{{ID: 16, AvgHoldSecondsMax: d("86.7"), Action: ABook}}, order, winner, ABook, 16},
		{"average hold 86.667 s not under 86.6", []Rule{{ID: 16, AvgHoldSecondsMax: d("86.6"), Action: ABook}}, order, winner, BBook, 0},
		{"average hold exactly t is not under t", []Rule{{ID: 16, AvgHoldSecondsMax: d("30"), Action: ABook}}, order, profile([2]string{"1", "30"}), BBook, 0},
		{"two of three under a minute ≥ 66", []Rule{{ID: 17, UnderMinuteShareMin: d("66"), Action: ABook}}, order, winner, ABook, 17},
		{"two of three under a minute < 67", []Rule{{ID: 17, UnderMinuteShareMin: d("67"), Action: ABook}}, order, winner, BBook, 0},
		{"exactly 60 s is not under a minute", []Rule{{ID: 18, UnderMinuteShareMin: d("100"), Action: ABook}}, order, profile([2]string{"1", "60"}), BBook, 0},
		{"59.999 s is under a minute", []Rule{{ID: 18, UnderMinuteShareMin: d("100"), Action: ABook}}, order, profile([2]string{"1", "59.999"}), ABook, 18},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, id := Route(c.rules, c.order, c.p)
			if a != c.action || id != c.rule {
				t.Fatalf("Route = %s, rule %d; want %s, rule %d", a, id, c.action, c.rule)
			}
		})
	}
}

// The profile's figures for three crafted trades, worked by hand.
func TestProfileFigures(t *testing.T) {
	t.Parallel()
	p := profile([2]string{"30.25", "10"}, [2]string{"20.10", "50"}, [2]string{"-10.05", "200"}, [2]string{"0", "61"})
	check := func(name string, got *decimal.Decimal, want string) {
		t.Helper()
		if (got == nil) != (want == "") || (got != nil && got.String() != want) {
			t.Errorf("%s = %v, want %q", name, got, want)
		}
	}
	if p.Trades != 4 || p.Wins != 2 || p.UnderMinute != 2 || p.HoldMillis != 321000 {
		t.Fatalf("counts %+v", p)
	}
	check("gross profit", &p.GrossProfit, "50.35")
	check("gross loss", &p.GrossLoss, "10.05")
	net := p.NetProfit()
	check("net", &net, "40.3")
	check("win rate", p.WinRate(), "50")               // 2 / 4
	check("profit factor", p.ProfitFactor(), "5.01")   // 50.35 / 10.05 = 5.00995… → 5.0100
	check("average hold", p.AvgHoldSeconds(), "80.25") // 321 / 4
	check("under a minute", p.UnderMinuteShare(), "50")
	var empty Profile
	check("empty win rate", empty.WinRate(), "")
	check("empty profit factor", empty.ProfitFactor(), "")
	check("empty average", empty.AvgHoldSeconds(), "")
}
