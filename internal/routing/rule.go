package routing

import (
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

// Action is where a routed order executes.
type Action string

const (
	BBook Action = "B_BOOK" // the desk fills at its own quote and carries the risk (INTERNAL)
	ABook Action = "A_BOOK" // the venue fills first, the desk books its price (EXTERNAL)
	// Hedge books the trade on the desk (INTERNAL) and opens the rule's HedgePercent of it at
	// the venue in the desk's own hedge book (internal/hedge), off the trader's path.
	Hedge Action = "HEDGE"
)

// Valid reports whether a is an action a rule may take.
func (a Action) Valid() bool { return a == BBook || a == ABook || a == Hedge }

// Execution is the order's execution under a.
func (a Action) Execution() fx.ExecutionMode {
	if a == ABook {
		return fx.External
	}
	return fx.Internal
}

// ActionOf is the action an account group's execution mode takes by default.
func ActionOf(m fx.ExecutionMode) Action {
	if m == fx.External {
		return ABook
	}
	return BBook
}

// Rule is one routing rule of an account group (fx_routing_rule). Every condition that is set
// must hold for the rule to match; an empty list or a nil bound is no condition. The JSON names
// are the API's, so an audit row reads like the request.
type Rule struct {
	ID           int64            `json:"id"`
	AccountGroup string           `json:"accountGroup"`
	Priority     int              `json:"priority"` // 1 is asked first
	Accounts     []int64          `json:"accounts"` // the order's account is one of these
	Symbols      []string         `json:"symbols"`  // the order's symbol is one of these
	VolumeMin    *decimal.Decimal `json:"volumeMin"`
	VolumeMax    *decimal.Decimal `json:"volumeMax"`
	// The profile conditions hold only for an account with at least MinTrades closed trades
	// (at least one when any profile condition is set).
	MinTrades *int64 `json:"minTrades"`
	// ProfitFactorMin: gross profit ≥ ProfitFactorMin × gross loss (an account with profits
	// and no loss has an unbounded profit factor).
	ProfitFactorMin *decimal.Decimal `json:"profitFactorMin"`
	// WinRateMin: winning trades ≥ WinRateMin percent of the closed trades.
	WinRateMin *decimal.Decimal `json:"winRateMin"`
	// AvgHoldSecondsMax: the average holding time is under this many seconds.
	AvgHoldSecondsMax *decimal.Decimal `json:"avgHoldSecondsMax"`
	// UnderMinuteShareMin: trades held under a minute are ≥ this percent of the closed trades.
	UnderMinuteShareMin *decimal.Decimal `json:"underMinuteShareMin"`
	Action              Action           `json:"action"`
	// HedgePercent is the share (1..100) of a HEDGE rule's orders opened at the venue in the
	// hedge book; nil for the other actions.
	HedgePercent *int      `json:"hedgePercent"`
	Note         string    `json:"note"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// UsesProfile reports whether r reads the trader profile.
func (r Rule) UsesProfile() bool {
	return r.MinTrades != nil || r.ProfitFactorMin != nil || r.WinRateMin != nil || r.AvgHoldSecondsMax != nil || r.UnderMinuteShareMin != nil
}

// Order is what a rule is matched against: the order as submitted and what its account group
// does when no rule matches.
type Order struct {
	AccountID int64
	Symbol    string
	Volume    decimal.Decimal
	Default   Action // the account group's execution mode, as an action
}

var hundred, thousand = decimal.NewFromInt(100), decimal.NewFromInt(1000)

// Route is the action of the first of rules (in priority order) that matches o for an account
// with profile p, and that rule's id; o.Default and 0 when none matches.
func Route(rules []Rule, o Order, p Profile) (Action, int64) {
	if r := Match(rules, o, p); r != nil {
		return r.Action, r.ID
	}
	return o.Default, 0
}

// Match is the first of rules (in priority order) that matches o for an account with profile p;
// nil when none does.
func Match(rules []Rule, o Order, p Profile) *Rule {
	for i := range rules {
		if rules[i].matches(o, p) {
			return &rules[i]
		}
	}
	return nil
}

func (r *Rule) matches(o Order, p Profile) bool {
	if len(r.Accounts) > 0 && !slices.Contains(r.Accounts, o.AccountID) {
		return false
	}
	if len(r.Symbols) > 0 && !slices.Contains(r.Symbols, o.Symbol) {
		return false
	}
	if r.VolumeMin != nil && o.Volume.LessThan(*r.VolumeMin) {
		return false
	}
	if r.VolumeMax != nil && o.Volume.GreaterThan(*r.VolumeMax) {
		return false
	}
	if !r.UsesProfile() {
		return true
	}
	need := int64(1)
	if r.MinTrades != nil && *r.MinTrades > need {
		need = *r.MinTrades
	}
	if p.Trades < need {
		return false
	}
	if r.ProfitFactorMin != nil {
		// gross profit ≥ x × gross loss, which holds for an unbounded profit factor (no loss)
		// but not for an account that has neither profit nor loss.
		if !p.GrossProfit.IsPositive() && !p.GrossLoss.IsPositive() {
			return false
		}
		if p.GrossProfit.LessThan(r.ProfitFactorMin.Mul(p.GrossLoss)) {
			return false
		}
	}
	trades := decimal.NewFromInt(p.Trades)
	if r.WinRateMin != nil && decimal.NewFromInt(p.Wins).Mul(hundred).LessThan(r.WinRateMin.Mul(trades)) {
		return false
	}
	if r.UnderMinuteShareMin != nil && decimal.NewFromInt(p.UnderMinute).Mul(hundred).LessThan(r.UnderMinuteShareMin.Mul(trades)) {
		return false
	}
	// average (ms) < t s  ⇔  Σ ms < t × 1000 × trades
	if r.AvgHoldSecondsMax != nil && !decimal.NewFromInt(p.HoldMillis).LessThan(r.AvgHoldSecondsMax.Mul(thousand).Mul(trades)) {
		return false
	}
	return true
}
