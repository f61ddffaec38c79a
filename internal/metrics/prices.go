package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/pricesource"
	"fxdesk/internal/tick"
)

// PriceSources is what the price-source series read on the holder: the engine's Selections and
// SourceStatuses (docs/operations.md, «Price sources»).
type PriceSources interface {
	Selections() []tick.Selection
	SourceStatuses() []tick.SourceStatus
}

var (
	srcConnectedDesc = prometheus.NewDesc("fxdesk_price_source_connected", "1 while the price source's session is up.", []string{"source"}, nil)
	srcTicksDesc     = prometheus.NewDesc("fxdesk_price_source_ticks_total",
		"Ticks of a price source by outcome: accepted (valid, wanted), held and dropped by the spike filter, published.", []string{"source", "outcome"}, nil)
	srcActiveDesc = prometheus.NewDesc("fxdesk_price_symbol_source",
		"1 for the source a symbol quotes from now (0 for the others).", []string{"symbol", "source"}, nil)
	srcFailoversDesc = prometheus.NewDesc("fxdesk_price_failovers",
		"Switches of a symbol away from a source since the engine started.", []string{"symbol"}, nil)
	srcOffPrimaryDesc = prometheus.NewDesc("fxdesk_price_symbols_off_primary",
		"Symbols quoting from other than their first source (neither pinned nor halted).", nil, nil)
)

type priceCollector struct{ p PriceSources }

// WatchPriceSources registers the holder's price-source series over p.
func (m *Metrics) WatchPriceSources(p PriceSources) {
	m.reg.MustRegister(&priceCollector{p: p})
}

func (c *priceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{srcConnectedDesc, srcTicksDesc, srcActiveDesc, srcFailoversDesc, srcOffPrimaryDesc} {
		ch <- d
	}
}

func (c *priceCollector) Collect(ch chan<- prometheus.Metric) {
	statuses := c.p.SourceStatuses()
	for _, s := range statuses {
		up := 0.0
		if s.Connected {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(srcConnectedDesc, prometheus.GaugeValue, up, s.Name)
		for outcome, n := range map[string]uint64{"accepted": s.Accepted, "held": s.Held, "dropped": s.Dropped, "published": s.Published} {
			ch <- prometheus.MustNewConstMetric(srcTicksDesc, prometheus.CounterValue, float64(n), s.Name, outcome)
		}
	}
	off := 0
	for _, sel := range c.p.Selections() {
		for _, s := range statuses {
			v := 0.0
			if s.Name == sel.Source {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(srcActiveDesc, prometheus.GaugeValue, v, sel.Symbol, s.Name)
		}
		ch <- prometheus.MustNewConstMetric(srcFailoversDesc, prometheus.CounterValue, float64(sel.Failovers), sel.Symbol)
		if len(statuses) > 0 && pricesource.OffPrimary(sel, statuses[0].Name) {
			off++
		}
	}
	ch <- prometheus.MustNewConstMetric(srcOffPrimaryDesc, prometheus.GaugeValue, float64(off))
}
