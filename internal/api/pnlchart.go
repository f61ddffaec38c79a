package api

import (
	"context"
	"fmt"
	"slices"
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
func chartOf(hours []pnl.Point) *pnlChart {
	if len(hours) == 0 {
		return nil
	}
	values := make([]decimal.Decimal, 0, len(hours)+1)
	values = append(values, decimal.Zero)
	for _, h := range hours {
		values = append(values, h.Cumulative)
	}
	p := newPlot(chartWidth, chartHeight, values)
	var sb strings.Builder
	for i, v := range values {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(p.point(i, v))
	}
	return &pnlChart{Width: chartWidth, Height: chartHeight, Points: sb.String(), ZeroY: fmt.Sprintf("%.1f", p.y(decimal.Zero)),
		Min: p.lo.StringFixed(2), Max: p.hi.StringFixed(2), Last: values[len(values)-1].StringFixed(2), Hours: len(hours)}
}

// plot places a series of len(values) points on a width × height canvas inside chartPad: x by
// index, evenly from left to right, y from the highest value (top) to the lowest (bottom). The
// server draws every chart as inline SVG from it: the pages run no script.
type plot struct {
	lo, hi        decimal.Decimal
	width, height int
	n             int
}

// newPlot scales a canvas to values, and to any more values that must fit on it.
func newPlot(width, height int, values []decimal.Decimal, more ...decimal.Decimal) plot {
	p := plot{width: width, height: height, n: len(values)}
	for i, v := range append(slices.Clone(values), more...) {
		if i == 0 {
			p.lo, p.hi = v, v
		}
		p.lo, p.hi = decimal.Min(p.lo, v), decimal.Max(p.hi, v)
	}
	return p
}

// x is point i's abscissa; a lone point sits in the middle.
func (p plot) x(i int) float64 {
	if p.n < 2 {
		return float64(p.width) / 2
	}
	return chartPad + float64(i)*float64(p.width-2*chartPad)/float64(p.n-1)
}

// y is value v's ordinate; a flat series sits on the top line.
func (p plot) y(v decimal.Decimal) float64 {
	span := p.hi.Sub(p.lo)
	if span.IsZero() {
		span = decimal.NewFromInt(1)
	}
	f, _ := p.hi.Sub(v).Div(span).Float64()
	return chartPad + f*float64(p.height-2*chartPad)
}

// point is point i at value v as an SVG coordinate pair.
func (p plot) point(i int, v decimal.Decimal) string { return fmt.Sprintf("%.1f,%.1f", p.x(i), p.y(v)) }

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
