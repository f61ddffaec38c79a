package routing

import (
	"time"

	"github.com/shopspring/decimal"
)

// Profile is a trader's record on one account, from the ledger: every close deal (a full or a
// partial close) is one trade, its profit the deal's amount in the account's currency and its
// holding time from the position's opening to the close. Commission and swaps are deals of
// their own and not part of a trade's profit.
type Profile struct {
	Trades      int64           // closed trades
	Wins        int64           // trades with a profit above zero
	GrossProfit decimal.Decimal // Σ profits of the winning trades
	GrossLoss   decimal.Decimal // Σ |losses| of the losing trades (≥ 0)
	HoldMillis  int64           // Σ holding times, milliseconds
	UnderMinute int64           // trades held under 60 s
	LastTradeAt *time.Time
}

// UnderMinuteMillis is the holding time under which a trade counts as held under a minute.
const UnderMinuteMillis = 60_000

// Trade is one close's contribution to a profile: its profit and how long the position had
// been open.
func Trade(profit decimal.Decimal, held time.Duration) Profile {
	ms := held.Milliseconds()
	if ms < 0 {
		ms = 0 // the clocks of the opening and the close disagree by a hair
	}
	p := Profile{Trades: 1, HoldMillis: ms, GrossProfit: decimal.Zero, GrossLoss: decimal.Zero}
	switch {
	case profit.IsPositive():
		p.Wins, p.GrossProfit = 1, profit
	case profit.IsNegative():
		p.GrossLoss = profit.Neg()
	}
	if ms < UnderMinuteMillis {
		p.UnderMinute = 1
	}
	return p
}

// Add is p with the trades of q added.
func (p Profile) Add(q Profile) Profile {
	out := Profile{Trades: p.Trades + q.Trades, Wins: p.Wins + q.Wins, GrossProfit: p.GrossProfit.Add(q.GrossProfit),
		GrossLoss: p.GrossLoss.Add(q.GrossLoss), HoldMillis: p.HoldMillis + q.HoldMillis, UnderMinute: p.UnderMinute + q.UnderMinute, LastTradeAt: p.LastTradeAt}
	if q.LastTradeAt != nil {
		out.LastTradeAt = q.LastTradeAt
	}
	return out
}

// NetProfit is gross profit less gross loss: the Σ of the trades' profits.
func (p Profile) NetProfit() decimal.Decimal { return p.GrossProfit.Sub(p.GrossLoss) }

// WinRate is the winning trades' percent of the trades, to two places; nil without trades.
func (p Profile) WinRate() *decimal.Decimal { return p.percent(p.Wins) }

// UnderMinuteShare is the percent of the trades held under a minute, to two places; nil without
// trades.
func (p Profile) UnderMinuteShare() *decimal.Decimal { return p.percent(p.UnderMinute) }

func (p Profile) percent(n int64) *decimal.Decimal {
	if p.Trades == 0 {
		return nil
	}
	v := decimal.NewFromInt(n*100).DivRound(decimal.NewFromInt(p.Trades), 2)
	return &v
}

// ProfitFactor is gross profit ÷ gross loss to four places; nil when there is no loss (unbounded,
// or undefined without trades).
func (p Profile) ProfitFactor() *decimal.Decimal {
	if !p.GrossLoss.IsPositive() {
		return nil
	}
	v := p.GrossProfit.DivRound(p.GrossLoss, 4)
	return &v
}

// AvgHoldSeconds is the average holding time in seconds to three places; nil without trades.
func (p Profile) AvgHoldSeconds() *decimal.Decimal {
	if p.Trades == 0 {
		return nil
	}
	v := decimal.NewFromInt(p.HoldMillis).DivRound(decimal.NewFromInt(p.Trades*1000), 3)
	return &v
}
