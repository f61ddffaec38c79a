package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/relay"
)

// NewWebhookFailures registers fxdesk_webhook_failures_total{endpoint}, counted by the webhook
// relay (relay.WebhooksConfig.Failures) as posts fail; an endpoint's series appears at its first
// failure.
func (m *Metrics) NewWebhookFailures() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_webhook_failures_total",
		Help: "Webhook posts the endpoint did not accept (an error, a timeout or a non-2xx answer), by endpoint id; each is retried with backoff until the last attempt dead-letters the event.",
	}, []string{"endpoint"})
	m.reg.MustRegister(v)
	return v
}

// WatchRelay adds the host platform's feed, read from the database at scrape time (bounded, so
// a dead database costs a scrape one second, not a hang): every cursor's lag in events and in
// seconds, and the open dead letters by endpoint.
func (m *Metrics) WatchRelay(read func(ctx context.Context) (relay.Status, error)) {
	m.reg.MustRegister(&relayCollector{read: read})
}

var (
	relayLagEventsDesc  = prometheus.NewDesc("fxdesk_events_relay_lag_events", "Events in the outbox a consumer has not relayed yet, by cursor (stream, webhook:<id>).", []string{"cursor"}, nil)
	relayLagSecondsDesc = prometheus.NewDesc("fxdesk_events_relay_lag_seconds", "Age of the oldest event a consumer has not relayed yet, by cursor (0 when it is up to date).", []string{"cursor"}, nil)
	relayPositionDesc   = prometheus.NewDesc("fxdesk_events_relay_position", "The last event id a consumer relayed, by cursor.", []string{"cursor"}, nil)
	deadLettersDesc     = prometheus.NewDesc("fxdesk_webhook_dead_letters", "Events a webhook endpoint did not accept after every attempt and no admin has replayed yet, by endpoint id.", []string{"endpoint"}, nil)
)

type relayCollector struct {
	read func(ctx context.Context) (relay.Status, error)
}

func (c *relayCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- relayLagEventsDesc
	ch <- relayLagSecondsDesc
	ch <- relayPositionDesc
	ch <- deadLettersDesc
}

func (c *relayCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(relayLagEventsDesc, err)
		return
	}
	for _, cur := range s.Cursors {
		ch <- prometheus.MustNewConstMetric(relayLagEventsDesc, prometheus.GaugeValue, float64(cur.LagEvents), cur.Name)
		ch <- prometheus.MustNewConstMetric(relayLagSecondsDesc, prometheus.GaugeValue, cur.LagSeconds, cur.Name)
		ch <- prometheus.MustNewConstMetric(relayPositionDesc, prometheus.GaugeValue, float64(cur.Position), cur.Name)
		if id, ok := cur.Webhook(); ok {
			n := 0
			for _, d := range s.DeadByEndpoint {
				if d.Endpoint == id {
					n = d.Open
				}
			}
			ch <- prometheus.MustNewConstMetric(deadLettersDesc, prometheus.GaugeValue, float64(n), id)
		}
	}
}
