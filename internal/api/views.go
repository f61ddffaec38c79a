package api

import (
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// Amounts, prices and volumes leave the desk as decimal strings: money with exactly its
// currency's minor units ("1050" yen, "10.50" dollars, "1.250" dinars), prices and volumes
// without trailing zeros.

func money(currency string, d decimal.Decimal) string { return fx.FormatMoney(currency, d) }

type accountView struct {
	ID       int64  `json:"id"`
	UserID   int64  `json:"userId"`
	Group    string `json:"group"`
	Currency string `json:"currency"`
	Leverage int    `json:"leverage"`
	Balance  string `json:"balance"`
	// Equity, UsedMargin and FreeMargin are null when they are unknown: an account with an open
	// position this process cannot price and no stored marks (never marked). Never a zero.
	Equity      *string    `json:"equity"`
	UsedMargin  *string    `json:"usedMargin"`
	FreeMargin  *string    `json:"freeMargin"`
	MarginLevel *string    `json:"marginLevel"` // percent; null when no margin is used, or unknown
	Live        bool       `json:"live"`        // false: the figures are the stored marks of markedAt
	MarkedAt    *time.Time `json:"markedAt,omitempty"`
	CreatedAt   time.Time  `json:"createdAt"`
	// State is what an admin lets the account do (ACTIVE, CLOSE_ONLY, DISABLED); StateReason why.
	State       string  `json:"state"`
	StateReason *string `json:"stateReason"`
}

// viewAccount shows an account with its metrics as trading.Accounts.Views worked them out, for
// every read alike: the list, the single read, the admin list and a new account.
func viewAccount(v trading.AccountView) accountView {
	a, m := v.Account, v.Metrics
	out := accountView{ID: a.ID, UserID: a.UserID, Group: a.Group, Currency: a.Currency, Leverage: a.Leverage,
		Balance: money(a.Currency, m.Balance), Live: v.Live, MarkedAt: a.MarkedAt, CreatedAt: a.CreatedAt.UTC(), State: stateOf(a.State), StateReason: a.StateReason}
	if !v.Marked {
		return out
	}
	equity, used, free := money(a.Currency, m.Equity), money(a.Currency, m.UsedMargin), money(a.Currency, m.FreeMargin)
	out.Equity, out.UsedMargin, out.FreeMargin = &equity, &used, &free
	if m.MarginLevel != nil {
		s := m.MarginLevel.StringFixed(2)
		out.MarginLevel = &s
	}
	return out
}

// stateOf is an account's state as shown: ACTIVE for an account built without one.
func stateOf(s fx.AccountState) string {
	if s == "" {
		return string(fx.AccountActive)
	}
	return string(s)
}

// orderView is the order payload of the events outbox (the API's order, one definition for
// both) with how it was executed.
type orderView struct {
	events.Order
	// Execution is INTERNAL (the desk filled it) or EXTERNAL (the venue did); VenueReason is
	// the venue's cancel reason of a REJECTED one, or why it is NOT_SENT.
	Execution   string  `json:"execution"`
	VenueReason *string `json:"venueReason,omitempty"`
	// RouteRuleID is the routing rule that chose Execution when the order was accepted; null
	// when its account group's execution mode did (docs/routing.md).
	RouteRuleID *int64 `json:"routeRuleId"`
	// HedgePercent is the share of it a HEDGE rule opens at the venue in the desk's hedge book
	// (omitted on every other order).
	HedgePercent *int `json:"hedgePercent,omitempty"`
}

func viewOrder(o book.Order) orderView {
	return orderView{Order: events.OrderOf(o), Execution: executionOf(o.Execution), VenueReason: o.VenueReason, RouteRuleID: o.RouteRuleID,
		HedgePercent: o.HedgePercent}
}

// positionView is the position payload of the events outbox: the API's position, one
// definition for both.
type positionView = events.Position

func viewPosition(p book.Position) positionView { return events.PositionOf(p) }

// dealView is the deal payload of the events outbox (the API's deal, one definition for both)
// with the deal's id and time.
type dealView struct {
	ID int64 `json:"id"`
	events.Balance
	CreatedAt time.Time `json:"createdAt"`
}

func viewDeal(d book.Deal) dealView {
	return dealView{ID: d.ID, Balance: events.BalanceOf(d), CreatedAt: d.CreatedAt.UTC()}
}

type instrumentView struct {
	Symbol          string `json:"symbol"`
	Base            string `json:"base"`
	Quote           string `json:"quote"`
	Digits          int    `json:"digits"`
	ContractSize    string `json:"contractSize"`
	Point           string `json:"point"`
	VolumeMin       string `json:"volumeMin"`
	VolumeStep      string `json:"volumeStep"`
	VolumeMax       string `json:"volumeMax"`
	SwapLong        string `json:"swapLong"`
	SwapShort       string `json:"swapShort"`
	SessionCalendar string `json:"sessionCalendar"`
	Status          string `json:"status"`
	Enabled         bool   `json:"enabled"`
	LeverageMax     int    `json:"leverageMax"`
	SymbolGroup     string `json:"symbolGroup"`
	MarkupPoints    string `json:"markupPoints"`
	CommissionLot   string `json:"commissionPerLot"`
	CommissionCcy   string `json:"commissionCurrency"`
	HedgedMargin    string `json:"hedgedMarginRate"`
}

func viewInstrument(in catalog.Instrument) instrumentView {
	return instrumentView{Symbol: in.Symbol, Base: in.Base, Quote: in.Quote, Digits: in.Digits, ContractSize: in.ContractSize.String(),
		Point: in.Point.String(), VolumeMin: in.VolumeMin.String(), VolumeStep: in.VolumeStep.String(), VolumeMax: in.VolumeMax.String(),
		SwapLong: in.SwapLong.String(), SwapShort: in.SwapShort.String(), SessionCalendar: in.SessionCalendar, Status: string(in.Status),
		Enabled: in.Enabled, LeverageMax: in.LeverageMax, SymbolGroup: in.SymbolGroup, MarkupPoints: in.Group.MarkupPoints.String(),
		CommissionLot: in.Group.CommissionPerLot.String(), CommissionCcy: in.Group.CommissionCurrency, HedgedMargin: in.Group.HedgedMarginRate.String()}
}

func mapSlice[T, V any](in []T, f func(T) V) []V {
	out := make([]V, 0, len(in))
	for _, x := range in {
		out = append(out, f(x))
	}
	return out
}

type accountGroupView struct {
	Name                      string `json:"name"`
	LeverageMax               int    `json:"leverageMax"`
	MarginCallLevel           string `json:"marginCallLevel"`
	StopOutLevel              string `json:"stopOutLevel"`
	ExecutionMode             string `json:"executionMode"`
	SwapFreeDefault           bool   `json:"swapFreeDefault"`
	NegativeBalanceProtection bool   `json:"negativeBalanceProtection"`
	MaxPendingOrders          *int   `json:"maxPendingOrders"` // null: the desk setting
	PositionMode              string `json:"positionMode"`
}

func viewAccountGroup(g catalog.AccountGroup) accountGroupView {
	return accountGroupView{Name: g.Name, LeverageMax: g.LeverageMax, MarginCallLevel: g.MarginCallLevel.String(),
		StopOutLevel: g.StopOutLevel.String(), ExecutionMode: string(g.Execution), SwapFreeDefault: g.SwapFreeDefault,
		NegativeBalanceProtection: g.NegativeBalanceProtection, MaxPendingOrders: g.MaxPendingOrders, PositionMode: string(g.PositionMode)}
}

func executionOf(m fx.ExecutionMode) string {
	if m == "" {
		return string(fx.Internal)
	}
	return string(m)
}
