// Package metrics exposes the desk's Prometheus series on /metrics. Most series are read at
// scrape time from the parts that own the state (lease keeper, tick engine), so the hot paths
// only pay where a value has to be observed as it happens (renew latency, request results).
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/mirror"
	"fxdesk/internal/risk"
	"fxdesk/internal/tick"
)

// Metrics is one process's registry and the series observed as events happen.
type Metrics struct {
	reg *prometheus.Registry

	RenewSeconds *prometheus.HistogramVec // lease renew latency by outcome
	SSEClients   prometheus.Gauge         // open markets-rail streams
	Orders       *prometheus.CounterVec   // order submissions by result
	Closes       *prometheus.CounterVec   // position closes by reason and result
	RiskOwnTime  prometheus.Histogram     // tick arrival → close handed to the database
	SwapCharges  *prometheus.CounterVec   // rollover charges by result
	GateDropped  *prometheus.CounterVec   // lease-guarded work the gate dropped, by work and at (gate.Config.Dropped)

	// The holder's group commit of fills and closes (trading.Config.Commits).
	CommitBatchSize prometheus.Histogram   // desk writes per batch
	CommitSeconds   prometheus.Histogram   // one batch's transaction, first statement to COMMIT's answer
	CommitRefused   prometheus.Counter     // writes the database refused, dropped alone
	CommitOneTrip   *prometheus.CounterVec // one-round-trip batches: committed, or run again on locked rows

	// Refused counts what the front door turned away before any work, by reason
	// (docs/architecture.md, «The front door»).
	Refused *prometheus.CounterVec
	// StreamsDropped counts streams ended because their client fell behind the fan-out for too
	// long; StreamUpdatesLost the quotes a stream lost while its buffer was full.
	StreamsDropped    prometheus.Counter
	StreamUpdatesLost prometheus.Counter

	// The trader's events stream (GET /api/fx/events/stream): open streams, events written to
	// them, and streams ended because their buffer filled (the client resumes from its last id).
	EventStreams        prometheus.Gauge
	EventsDelivered     prometheus.Counter
	EventStreamsDropped prometheus.Counter

	// Negative balance protection (trading.Config.NBP): resets committed, and what they cost the
	// desk by account currency.
	NBPResets *prometheus.CounterVec
	NBPAmount *prometheus.CounterVec

	// PriceSwitches counts switches of a symbol's price source, by symbol, from and to
	// (pricesource.Watcher).
	PriceSwitches *prometheus.CounterVec
}

// Refusal reasons of fxdesk_http_refused_total.
const (
	RefusedConnections    = "connections"     // the process's open-connection cap
	RefusedRateToken      = "rate_token"      // requests per second of one token
	RefusedRateAddr       = "rate_address"    // requests per second of one client address
	RefusedStreamsToken   = "streams_token"   // open streams of one token
	RefusedStreamsProcess = "streams_process" // open streams of the process
	RefusedBody           = "body_too_large"  // a body past the edge's bound
	RefusedUnknownToken   = "unknown_token"   // a bearer token that names no live token
	RefusedTokenLookups   = "token_lookups"   // every token lookup slot taken (auth.LookupSlots)
)

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
	m.Orders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_orders_total", Help: "Order submissions by result (filled, resting, replayed, canceled when the client went away, or the error code).",
	}, []string{"result"})
	m.Closes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_closes_total", Help: "Position closes by reason (CLIENT, SL, TP, STOP_OUT) and result (closed, canceled when the client went away, or the error code).",
	}, []string{"reason", "result"})
	m.RiskOwnTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fxdesk_risk_own_time_seconds",
		Help:    "Risk engine own time: from a tick's arrival to the moment its close or fill is handed to the database.",
		Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
	})
	m.SwapCharges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_swap_charges_total", Help: "Rollover charges by result (charged, pending, expired, skipped).",
	}, []string{"result"})
	m.GateDropped = gate.NewDropped()
	m.CommitBatchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fxdesk_commit_batch_size",
		Help:    "Desk-priced fills and closes per group-committed transaction on the holder (writes that arrived while the previous commit was in flight).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	m.CommitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fxdesk_commit_seconds",
		Help:    "Time of one group-committed transaction, from its first statement to COMMIT's answer (what every write in the batch waited for the database).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	})
	m.CommitRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fxdesk_commit_rows_refused_total",
		Help: "Fills and closes the database refused when their batch was written row by row; each was dropped alone and logged with what it was.",
	})
	m.CommitOneTrip = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_commit_one_trip_total",
		Help: "Batches of fills on remembered accounts sent in one round trip, by result: committed, or stale (the check found a row changed, a retried nonce, or a statement was refused, and the batch ran again on locked rows).",
	}, []string{"result"})
	for _, result := range []string{"committed", "stale"} {
		m.CommitOneTrip.WithLabelValues(result) // both series exist from the start, at zero
	}
	m.Refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_http_refused_total",
		Help: "Requests and connections the front door refused before doing any work, by reason (connections, rate_token, rate_address, streams_token, streams_process, body_too_large, unknown_token, token_lookups; a follower's forwards past their bound are logged by the forwarder).",
	}, []string{"reason"})
	for _, reason := range []string{RefusedConnections, RefusedRateToken, RefusedRateAddr, RefusedStreamsToken, RefusedStreamsProcess, RefusedBody, RefusedUnknownToken, RefusedTokenLookups} {
		m.Refused.WithLabelValues(reason)
	}
	m.StreamsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fxdesk_sse_dropped_total",
		Help: "Markets-rail streams ended because their buffer stayed full for 5 s (the client reconnects and starts from the latest quotes).",
	})
	m.StreamUpdatesLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fxdesk_sse_updates_lost_total",
		Help: "Quotes a markets-rail stream lost because its buffer was full (its client was behind; the next quote supersedes it).",
	})
	m.EventStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fxdesk_event_stream_subscribers", Help: "Open trader events streams (GET /api/fx/events/stream) of this process.",
	})
	m.EventsDelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fxdesk_event_stream_delivered_total",
		Help: "Events written to trader events streams, from the table (a resumed stream's backlog) and live.",
	})
	m.EventStreamsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "fxdesk_event_stream_dropped_total",
		Help: "Trader events streams ended because their buffer filled (the client was behind); it resumes with Last-Event-ID and loses nothing.",
	})
	m.NBPResets = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_nbp_resets_total",
		Help: "Negative balance protection resets: closes that left an account of a protected group below zero, followed by one ADJUSTMENT deal back to zero, by account currency.",
	}, []string{"currency"})
	m.NBPAmount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_nbp_reset_amount_total",
		Help: "What negative balance protection's resets cost the desk (the ADJUSTMENT deals' sum), in units of the account currency named by the label.",
	}, []string{"currency"})
	reg.MustRegister(m.Refused, m.StreamsDropped, m.StreamUpdatesLost, m.NBPResets, m.NBPAmount)
	reg.MustRegister(m.EventStreams, m.EventsDelivered, m.EventStreamsDropped)
	m.PriceSwitches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_price_switches_total", Help: "Switches of a symbol's price source, by symbol, from and to.",
	}, []string{"symbol", "from", "to"})
	reg.MustRegister(m.PriceSwitches)
	reg.MustRegister(m.RenewSeconds, m.SSEClients, m.Orders, m.Closes, m.RiskOwnTime, m.SwapCharges, m.GateDropped,
		m.CommitBatchSize, m.CommitSeconds, m.CommitRefused, m.CommitOneTrip)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fxdesk_build_info", Help: "Always 1; labels name the process.", ConstLabels: prometheus.Labels{"process": process},
	}, func() float64 { return 1 }))
	return m
}

// Handler serves the registry. A collector that cannot read the database (the open alerts, the
// relay's lag) drops its own series from the scrape, not the whole scrape: during an outage the
// scraper still gets the lease, the feed and the process, and promhttp_metric_handler_errors_total
// counts what was left out.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// ObserveRenew records one renew cycle.
func (m *Metrics) ObserveRenew(took time.Duration, outcome string) {
	m.RenewSeconds.WithLabelValues(outcome).Observe(took.Seconds())
}

// ObserveBatch records one group-committed batch (book.CommitObserver).
func (m *Metrics) ObserveBatch(size int, took time.Duration) {
	m.CommitBatchSize.Observe(float64(size))
	m.CommitSeconds.Observe(took.Seconds())
}

// ObserveNBPReset counts one negative balance protection reset of amount in currency
// (trading.NBPObserver).
func (m *Metrics) ObserveNBPReset(currency string, amount decimal.Decimal) {
	m.NBPResets.WithLabelValues(currency).Inc()
	m.NBPAmount.WithLabelValues(currency).Add(amount.InexactFloat64())
}

// ObserveRefused records one write dropped by the database (book.CommitObserver).
func (m *Metrics) ObserveRefused() { m.CommitRefused.Inc() }

// ObserveOneTrip records one batch sent in one round trip (book.CommitObserver): committed,
// or stale and run again on locked rows.
func (m *Metrics) ObserveOneTrip(committed bool) {
	result := "stale"
	if committed {
		result = "committed"
	}
	m.CommitOneTrip.WithLabelValues(result).Inc()
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
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_held", Help: "1 while this process may start lease-guarded work (the gate admits work)."},
			state(func(s lease.State) float64 { return b(s.Trusted) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_term", Help: "Fencing term of this process's hold (0 when it never held)."},
			state(func(s lease.State) float64 { return float64(s.Term) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fxdesk_lease_trust_left_seconds", Help: "Time until the gate stops admitting work without another successful renew."},
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

	srcConnectedDesc = prometheus.NewDesc("fxdesk_price_source_connected", "1 while the price source's session is up.", []string{"source"}, nil)
	srcTicksDesc     = prometheus.NewDesc("fxdesk_price_source_ticks_total", "Valid quotes of a price source by fate: accepted (offered for a wanted symbol), published, held by the spike filter, dropped by it.", []string{"source", "outcome"}, nil)
	filteredDesc     = prometheus.NewDesc("fxdesk_price_filtered_total", "Ticks the spike filter held, and held ticks it dropped, per symbol and source.", []string{"symbol", "source", "outcome"}, nil)
	failoversDesc    = prometheus.NewDesc("fxdesk_price_source_switches_total", "Changes of a symbol's active price source (failovers, fail-backs, pins).", []string{"symbol"}, nil)
	activeDesc       = prometheus.NewDesc("fxdesk_price_active_source", "1 for each symbol's active price source.", []string{"symbol", "source"}, nil)
	offPrimaryDesc   = prometheus.NewDesc("fxdesk_price_symbols_off_primary", "Wanted symbols quoted from other than their first source.", nil, nil)
)

type engineCollector struct{ e *tick.Engine }

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{ticksDesc, droppedDesc, connectedDesc, symbolsDesc, ageDesc, updDropDesc,
		srcConnectedDesc, srcTicksDesc, filteredDesc, failoversDesc, activeDesc, offPrimaryDesc} {
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
	c.collectSources(ch)
}

// collectSources adds the per-source and per-symbol series of price selection and the filter.
func (c *engineCollector) collectSources(ch chan<- prometheus.Metric) {
	statuses := c.e.SourceStatuses()
	for _, st := range statuses {
		connected := 0.0
		if st.Connected {
			connected = 1
		}
		ch <- prometheus.MustNewConstMetric(srcConnectedDesc, prometheus.GaugeValue, connected, st.Name)
		for outcome, n := range map[string]uint64{"accepted": st.Accepted, "published": st.Published, "held": st.Held, "dropped": st.Dropped} {
			ch <- prometheus.MustNewConstMetric(srcTicksDesc, prometheus.CounterValue, float64(n), st.Name, outcome)
		}
	}
	for _, fc := range c.e.FilterCounts() {
		ch <- prometheus.MustNewConstMetric(filteredDesc, prometheus.CounterValue, float64(fc.Held), fc.Symbol, fc.Source, "held")
		ch <- prometheus.MustNewConstMetric(filteredDesc, prometheus.CounterValue, float64(fc.Dropped), fc.Symbol, fc.Source, "dropped")
	}
	off := 0
	for _, sel := range c.e.Selections() {
		ch <- prometheus.MustNewConstMetric(failoversDesc, prometheus.CounterValue, float64(sel.Failovers), sel.Symbol)
		ch <- prometheus.MustNewConstMetric(activeDesc, prometheus.GaugeValue, 1, sel.Symbol, sel.Source)
		if len(statuses) > 0 && sel.Source != statuses[0].Name {
			off++
		}
	}
	ch <- prometheus.MustNewConstMetric(offPrimaryDesc, prometheus.GaugeValue, float64(off))
}

// WatchMirror adds the quote mirror's series (publisher or follower), read at scrape time.
func (m *Metrics) WatchMirror(status func() mirror.Status) {
	m.reg.MustRegister(&mirrorCollector{status: status})
}

var (
	mirrorAgeDesc     = prometheus.NewDesc("fxdesk_mirror_age_seconds", "Age of the quote mirror snapshot (follower: on the leader's clock; publisher: since its last publish).", []string{"mode"}, nil)
	mirrorCycleDesc   = prometheus.NewDesc("fxdesk_mirror_cycle_seconds", "Duration of the last publish (publisher) or read-and-decode (follower).", []string{"mode"}, nil)
	mirrorSymbolsDesc = prometheus.NewDesc("fxdesk_mirror_symbols", "Symbols in the last snapshot.", []string{"mode"}, nil)
	mirrorRefusedDesc = prometheus.NewDesc("fxdesk_mirror_refused_symbols", "Symbols the follower refuses for age while their session is open.", []string{"mode"}, nil)
)

type mirrorCollector struct{ status func() mirror.Status }

func (c *mirrorCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mirrorAgeDesc
	ch <- mirrorCycleDesc
	ch <- mirrorSymbolsDesc
	ch <- mirrorRefusedDesc
}

func (c *mirrorCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.status()
	mode := string(s.Mode)
	ch <- prometheus.MustNewConstMetric(mirrorAgeDesc, prometheus.GaugeValue, float64(s.AgeMs)/1000, mode)
	ch <- prometheus.MustNewConstMetric(mirrorCycleDesc, prometheus.GaugeValue, s.LastCycleMs/1000, mode)
	ch <- prometheus.MustNewConstMetric(mirrorSymbolsDesc, prometheus.GaugeValue, float64(s.Symbols), mode)
	ch <- prometheus.MustNewConstMetric(mirrorRefusedDesc, prometheus.GaugeValue, float64(len(s.Refused)), mode)
}

// WatchAlerts adds the open alerts by code, read from the inbox at scrape time (bounded, so a
// dead database costs a scrape one second, not a hang).
func (m *Metrics) WatchAlerts(inbox *alert.Inbox) {
	m.reg.MustRegister(&alertCollector{inbox: inbox})
}

var alertsOpenDesc = prometheus.NewDesc("fxdesk_alerts_open", "Unresolved alerts in the inbox, by code and severity.", []string{"code", "severity"}, nil)

type alertCollector struct{ inbox *alert.Inbox }

func (c *alertCollector) Describe(ch chan<- *prometheus.Desc) { ch <- alertsOpenDesc }

func (c *alertCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	alerts, err := c.inbox.List(ctx, alert.Filter{Statuses: []alert.Status{alert.Open, alert.Acknowledged}, Limit: alert.MaxLimit})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(alertsOpenDesc, err)
		return
	}
	type key struct{ code, severity string }
	n := map[key]int{}
	for _, a := range alerts {
		n[key{a.Code, string(a.Severity)}]++
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(alertsOpenDesc, prometheus.GaugeValue, float64(v), k.code, k.severity)
	}
}

// WatchRisk adds the risk engine's counters, read from its Stats at scrape time (holder only).
func (m *Metrics) WatchRisk(stats func() risk.Stats) {
	m.reg.MustRegister(&riskCollector{stats: stats})
}

var (
	riskHeldDesc   = prometheus.NewDesc("fxdesk_risk_watched", "What the risk engine watches, by kind (positions, orders, accounts, symbols, queued).", []string{"kind"}, nil)
	riskTicksDesc  = prometheus.NewDesc("fxdesk_risk_ticks_total", "Ticks on watched symbols, evaluated or dropped at the gate.", []string{"outcome"}, nil)
	riskWorkDesc   = prometheus.NewDesc("fxdesk_risk_work_total", "Risk engine work by kind (close_queued, fill_queued, dropped_at_gate, executor_error, already_closed, market_refused, stop_out, stop_out_skipped, margin_call).", []string{"kind"}, nil)
	riskLoadedDesc = prometheus.NewDesc("fxdesk_risk_loaded", "1 once the risk engine has loaded every open position and resting order.", nil, nil)
)

type riskCollector struct{ stats func() risk.Stats }

func (c *riskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- riskHeldDesc
	ch <- riskTicksDesc
	ch <- riskWorkDesc
	ch <- riskLoadedDesc
}

func (c *riskCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	for kind, n := range map[string]int{"positions": s.Positions, "orders": s.Orders, "accounts": s.Accounts, "symbols": s.Symbols, "queued": s.Queued} {
		ch <- prometheus.MustNewConstMetric(riskHeldDesc, prometheus.GaugeValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(riskTicksDesc, prometheus.CounterValue, float64(s.TicksEvaluated), "evaluated")
	ch <- prometheus.MustNewConstMetric(riskTicksDesc, prometheus.CounterValue, float64(s.TicksDropped), "dropped_at_gate")
	for kind, n := range map[string]uint64{
		"close_queued": s.ClosesQueued, "fill_queued": s.FillsQueued, "dropped_at_gate": s.WorkDropped,
		"executor_error": s.ExecutorErrors, "already_closed": s.AlreadyClosed, "market_refused": s.MarketRefused,
		"stop_out": s.StopOuts, "stop_out_skipped": s.StopOutSkips, "margin_call": s.MarginCalls,
	} {
		ch <- prometheus.MustNewConstMetric(riskWorkDesc, prometheus.CounterValue, float64(n), kind)
	}
	loaded := 0.0
	if s.Loaded {
		loaded = 1
	}
	ch <- prometheus.MustNewConstMetric(riskLoadedDesc, prometheus.GaugeValue, loaded)
}
