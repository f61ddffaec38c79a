package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/venue"
)

// Venue is the execution venue's executor as Prometheus sees it (venue.ExecutorObserver).
type Venue struct {
	OwnTime     prometheus.Histogram
	Queued      prometheus.Histogram
	Connections *prometheus.CounterVec
}

// NewVenue registers the series the venue executor observes as they happen; WatchVenue adds
// the ones read from it at scrape time, once it exists.
func (m *Metrics) NewVenue() *Venue {
	v := &Venue{
		OwnTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fxdesk_venue_own_time_seconds",
			Help:    "Venue call own time: from its trigger (the tick that triggered a close, or the order's arrival) to the moment its request was written to the socket, excluding the venue's answer.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		Queued: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fxdesk_venue_queue_seconds",
			Help:    "Time a venue call waited for a free executor worker (all busy: the burst is larger than FXDESK_VENUE_CONCURRENCY).",
			Buckets: []float64{.00001, .0001, .001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		Connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fxdesk_venue_connections_opened_total",
			Help: "Connections dialled to the venue: when=warm before they were needed, when=demand by a call that found none idle (in a burst, that is the cost the warm pool exists to avoid).",
		}, []string{"when"}),
	}
	m.reg.MustRegister(v.OwnTime, v.Queued, v.Connections)
	return v
}

// WatchVenue adds the executor's gauges, read from stats at scrape time.
func (m *Metrics) WatchVenue(stats func() venue.ExecutorStats) {
	gauge := func(name, help string, read func(venue.ExecutorStats) float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return read(stats()) }))
	}
	gauge("fxdesk_venue_calls_queued", "Venue calls waiting for a free executor worker now.", func(s venue.ExecutorStats) float64 { return float64(s.Queued) })
	gauge("fxdesk_venue_calls_in_flight", "Venue calls waiting for the venue's answer now.", func(s venue.ExecutorStats) float64 { return float64(s.InFlight) })
	gauge("fxdesk_venue_workers", "Executor workers started (one per call that can be in flight).", func(s venue.ExecutorStats) float64 { return float64(s.Workers) })
	gauge("fxdesk_venue_reachable", "1 while the venue answers, 0 while EXTERNAL opens are refused because it does not.", func(s venue.ExecutorStats) float64 {
		if s.Reachable {
			return 1
		}
		return 0
	})
}

func (v *Venue) ObserveOwnTime(d time.Duration) { v.OwnTime.Observe(d.Seconds()) }
func (v *Venue) ObserveQueued(d time.Duration)  { v.Queued.Observe(d.Seconds()) }
func (v *Venue) ObserveConnection(warm bool) {
	when := "demand"
	if warm {
		when = "warm"
	}
	v.Connections.WithLabelValues(when).Inc()
}
