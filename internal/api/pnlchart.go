package api

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/pnl"
)

// pnlDay is the status page's "Dealer's P&L today": the day's report and its chart, drawn as
// inline SVG on the server (the page runs no script).
type pnlDay struct {
	View  pnlView
	Chart *pnlChart // nil when the day's series is not available (no conversion here)
	Error string
}

// pnlChart is the day's cumulative P&L in the reporting currency, one point per hour, on a
// Width × Height canvas: Points is the polyline, ZeroY the zero line.
type pnlChart struct {
	Width, Height int
	Points        string
	ZeroY         string
	Min, Max      string // the axis' bounds, in the reporting currency
	Last          string
	Hours         int
}

const (
	chartWidth, chartHeight = 480, 120
	chartPad                = 6
)

// chartOf draws hours' cumulative series, starting from zero at the day's start.
func chartOf(hours []pnl.Hour) *pnlChart {
	if len(hours) == 0 {
		return nil
	}
	values := make([]decimal.Decimal, 0, len(hours)+1)
	values = append(values, decimal.Zero)
	for _, h := range hours {
		values = append(values, h.Cumulative)
	}
	lo, hi := decimal.Zero, decimal.Zero
	for _, v := range values {
		lo, hi = decimal.Min(lo, v), decimal.Max(hi, v)
	}
	span := hi.Sub(lo)
	if span.IsZero() {
		span = decimal.NewFromInt(1)
	}
	h := float64(chartHeight - 2*chartPad)
	y := func(v decimal.Decimal) float64 {
		f, _ := hi.Sub(v).Div(span).Float64()
		return chartPad + f*h
	}
	step := float64(chartWidth-2*chartPad) / float64(len(values)-1)
	var sb strings.Builder
	for i, v := range values {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "%.1f,%.1f", chartPad+float64(i)*step, y(v))
	}
	return &pnlChart{Width: chartWidth, Height: chartHeight, Points: sb.String(), ZeroY: fmt.Sprintf("%.1f", y(decimal.Zero)),
		Min: lo.StringFixed(2), Max: hi.StringFixed(2), Last: values[len(values)-1].StringFixed(2), Hours: len(hours)}
}

// buildPnLDay reads the trading day so far for the status page, bounded like the page's other
// reads.
func buildPnLDay(ctx context.Context, d Deps, now time.Time) *pnlDay {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	from, to, floating, err := pnlRange(nil, now)
	if err != nil {
		return &pnlDay{Error: err.Error()}
	}
	rep, err := readPnL(ctx, d, from, to, floating)
	if err != nil {
		return &pnlDay{Error: err.Error()}
	}
	return &pnlDay{View: viewOf(rep), Chart: chartOf(rep.Hours)}
}
