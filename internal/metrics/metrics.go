// Package metrics exposes the desk's Prometheus series on /metrics. Most series are read at
// scrape time from the parts that own the state (lease keeper, tick engine), so the hot paths
// only pay where a value has to be observed as it happens (renew latency, request results).
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"fxdesk/internal/lease"
	"fxdesk/internal/tick"
)

// Metrics is one process's registry and the series observed as events happen.
type Metrics struct {
	reg *prometheus.Registry

	RenewSeconds *prometheus.HistogramVec // lease renew latency by outcome
	SSEClients   prometheus.Gauge         // open markets-rail streams
}

// New returns a registry with the Go and process collectors and the desk's event series.
func New(process string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg: reg,
		RenewSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fxdesk_lease_renew_seconds",
			Help:    "Time taken by one engine lease renew cycle, by outcome (ok, failed, lost).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"outcome"}),
		SSEClients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fxdesk_sse_clients", Help: "Open markets-rail (server-sent events) streams.",
		}),
	}
	reg.MustRegister(m.RenewSeconds, m.SSEClients)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fxdesk_build_info", Help: "Always 1; labels name the process.", ConstLabels: prometheus.Labels{"process": process},
	}, func() float64 { return 1 }))
	return m
}

// Registry is the underlying registry, for parts that add their own series.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveRenew records one renew cycle.
func (m *Metrics) ObserveRenew(took time.Duration, outcome string) {
	m.RenewSeconds.WithLabelValues(outcome).Observe(took.Seconds())
}

// WatchLease adds the lease series, read from the keeper at scrape time.
func (m *Metrics) WatchLease(k *lease.Keeper) {
	state := func(f func(lease.State) float64) func() float64 { return func() float64 { return f(k.State()) } }
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_held", Help: "1 while this process may start lease-guarded work (HoldsLease)."},
			state(func(s lease.State) float64 { return b(s.HoldsLease) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_term", Help: "Fencing term of this process's hold (0 when it never held)."},
			state(func(s lease.State) float64 { return float64(s.Term) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_trust_left_seconds", Help: "Time until HoldsLease turns false without another successful renew."},
			state(func(s lease.State) float64 { return s.TrustLeft.Seconds() })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_lost", Help: "1 once another process took the lease from this one."},
			state(func(s lease.State) float64 { return b(s.Lost) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_fail_open", Help: "1 while running without a working arbiter."},
			state(func(s lease.State) float64 { return b(s.FailOpen) })),
	)
}

// WatchEngine adds the tick engine's series, read from its status at scrape time.
func (m *Metrics) WatchEngine(e *tick.Engine) {
	m.reg.MustRegister(&engineCollector{e: e})
}

var (
	ticksDesc     = prometheus.NewDesc("fxdesk_ticks_received_total", "Quotes accepted from the provider.", nil, nil)
	droppedDesc   = prometheus.NewDesc("fxdesk_ticks_dropped_total", "Quotes rejected before storage, by reason.", []string{"reason"}, nil)
	connectedDesc = prometheus.NewDesc("fxdesk_feed_connected", "1 while the provider socket is connected.", nil, nil)
	symbolsDesc   = prometheus.NewDesc("fxdesk_symbols", "Wanted symbols by state.", []string{"state"}, nil)
	ageDesc       = prometheus.NewDesc("fxdesk_quote_age_seconds", "Age of the newest accepted quote.", nil, nil)
	updDropDesc   = prometheus.NewDesc("fxdesk_updates_dropped_total", "Price updates dropped for slow in-process subscribers.", nil, nil)
)

type engineCollector struct{ e *tick.Engine }

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ticksDesc, droppedDesc, connectedDesc, symbolsDesc, ageDesc, updDropDesc} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.Status()
	ch <- prometheus.MustNewConstMetric(ticksDesc, prometheus.CounterValue, float64(s.Accepted))
	for reason, n := range map[string]uint64{
		"malformed": s.Rejected.Malformed, "undated": s.Rejected.Undated, "non_positive": s.Rejected.NonPositive,
		"crossed": s.Rejected.Crossed, "unknown_pair": s.Rejected.UnknownPair,
	} {
		ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(n), reason)
	}
	connected := 0.0
	if s.Connected {
		connected = 1
	}
	ch <- prometheus.MustNewConstMetric(connectedDesc, prometheus.GaugeValue, connected)
	ch <- prometheus.MustNewConstMetric(symbolsDesc, prometheus.GaugeValue, float64(s.Quoting), "QUOTING")
	ch <- prometheus.MustNewConstMetric(symbolsDesc, prometheus.GaugeValue, float64(s.Halted), "QUOTING_HALTED")
	ch <- prometheus.MustNewConstMetric(symbolsDesc, prometheus.GaugeValue, float64(s.Closed), "MARKET_CLOSED")
	ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, s.LastTickAge.Seconds())
	ch <- prometheus.MustNewConstMetric(updDropDesc, prometheus.CounterValue, float64(s.UpdatesDropped))
}
