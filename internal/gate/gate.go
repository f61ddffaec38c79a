// Package gate is the one place that admits or drops lease-guarded work (docs/architecture.md, «The
// gate»): a fill or a close at the desk's price, the risk engine's ticks, sweeps, closes, fills,
// stop-outs and margin calls, the venue jobs, the hedger, the quote mirror's publishing and the
// events relay.
// Work is admitted only while the engine lease is trusted (lease.Keeper.HoldsLease); otherwise it
// is dropped before it starts, with one warning naming what was not executed (attribute "work")
// and one count in fxdesk_gate_dropped_total{work,at}. The storage-side term fence stays in the write's own
// transaction; a write it refuses is reported here too (Fenced), so both refusals answer the same
// error, log the same way and count in the same series.
//
// A fill is admitted only once the holder's risk view is loaded as well (Config.Watch): a fill
// opens a position or rests an order that the risk engine must watch, and on a holder that has
// just booted or taken over, the engine that will watch it is still reading the book. Such a fill
// is refused with ErrRiskViewLoading, counted under at="risk_view" (docs/architecture.md, «The
// gate»).
//
// The gate never queues dropped work for replay: the risk engine's lease_restored sweep re-derives
// what is due from the state of that moment.
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"fxdesk/internal/fx"
)

// Work is a kind of lease-guarded work. The kinds are a closed list so that the metric's label set
// stays bounded; what exactly was dropped (a position id, a job name) travels as log attributes.
type Work uint8

const (
	Fill                Work = iota // a fill at the desk's price: a MARKET submit, a resting order's fill (trading)
	Close                           // a close at the desk's price, a trader's or the risk engine's (trading)
	Withdrawal                      // a withdrawal whose free margin this process prices (trading)
	RiskTick                        // the risk engine's evaluation of one tick
	RiskSweep                       // a full risk sweep (boot, lease_restored, updates_dropped)
	RiskClose                       // a stop loss or take profit the risk engine triggered
	StopOut                         // a stop-out close the risk engine triggered
	RiskFill                        // a resting order the risk engine triggered
	MarginCall                      // a margin-call alert
	ExecutionReconciler             // the venue job runFxExecutionReconciler
	HedgeMonitor                    // the venue job runFxHedgeMonitor
	MirrorPublish                   // one quote mirror snapshot
	TickPublish                     // a batch of ticks published for follower web processes (mirror.StreamPublisher)
	VenueSend                       // an order or a trade close sent to the execution venue (A-book)
	EventRelay                      // one batch of the events outbox relayed to the Redis Stream (relay.Stream)
	WebhookSend                     // one event posted to a webhook endpoint (relay.Webhooks)
	Hedger                          // one pass of the hedger over the limited symbols (hedger.Runner)
	TrailFlush                      // one batch of moved trailing-stop levels stored (trading.StoreTrailLevels)
	numWork
)

var workNames = [numWork]string{
	Fill: "fill", Close: "close", Withdrawal: "withdrawal",
	RiskTick: "risk_tick", RiskSweep: "risk_sweep", RiskClose: "risk_close", StopOut: "stop_out",
	RiskFill: "risk_fill", MarginCall: "margin_call", ExecutionReconciler: "execution_reconciler", HedgeMonitor: "hedge_monitor", MirrorPublish: "mirror_publish",
	TickPublish: "tick_publish", VenueSend: "venue_send", EventRelay: "event_relay", WebhookSend: "webhook_send",
	Hedger: "hedger", TrailFlush: "trail_flush",
}

// Kinds lists every kind of work, in declaration order.
func Kinds() []Work {
	out := make([]Work, numWork)
	for i := range out {
		out[i] = Work(i)
	}
	return out
}

func (w Work) String() string {
	if w < numWork {
		return workNames[w]
	}
	return fmt.Sprintf("work(%d)", uint8(w))
}

// periodic work recurs on every tick or timer: a run of drops is logged at its first drop only
// (it is counted every time), or a lease lost for good would log every tick for ever.
func (w Work) periodic() bool {
	return w == RiskTick || w == ExecutionReconciler || w == HedgeMonitor || w == MirrorPublish || w == TickPublish ||
		w == EventRelay || w == WebhookSend || w == Hedger || w == TrailFlush
}

// ErrNotHolder is the gate's one answer for dropped work. It is an fx EUNAVAILABLE error with the
// desk's pricing text (docs/architecture.md, «Who may quote»), so the API's one error table answers
// 503 "Pricing is temporarily unavailable for this instrument — please retry shortly"; a withdrawal
// turns it into MsgPositionsUnpriceable. Match it with errors.Is.
var ErrNotHolder error = &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgPricingUnavailable}

// ErrRiskViewLoading answers a fill refused because the risk view that will watch it is not loaded
// yet: an fx EUNAVAILABLE error (503 with Retry-After), retried like a pricing refusal, with a text
// of its own so a trader is not told the price is missing while prices stream. Nothing was written.
var ErrRiskViewLoading error = &fx.Error{Code: fx.EUNAVAILABLE, Message: fx.MsgRiskViewLoading}

// Watch says whether the risk engine watches the desk yet: its view is loaded and its first sweep
// has run (cmd/web: the holder's engine, risk.Engine.Watching). Watching must not block.
type Watch interface {
	Watching() bool
}

// Lease says whether lease-guarded work may start now (*lease.Keeper).
type Lease interface {
	HoldsLease() bool
}

// NoLease is the lease of a process that never contends (fxdesk-cron): it never holds.
var NoLease Lease = noLease{}

type noLease struct{}

func (noLease) HoldsLease() bool { return false }

// NewDropped returns the gate's one series, fxdesk_gate_dropped_total{work,at}, unregistered:
// metrics.New registers it for /metrics; tests read it with prometheus/testutil.
func NewDropped() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fxdesk_gate_dropped_total",
		Help: "Lease-guarded work not executed, by work (fill, close, risk_tick, mirror_publish, …) and at (gate: dropped before it started; fence: refused by the term fence inside its transaction; risk_view: a fill refused while the holder's risk view loads).",
	}, []string{"work", "at"})
}

// Config builds a Gate. Lease, Log and Dropped are required.
type Config struct {
	Lease Lease
	Log   *slog.Logger
	// Dropped is NewDropped's series (metrics.Metrics.GateDropped on a process).
	Dropped *prometheus.CounterVec
	// Watch, when set, must be watching for a Fill to be admitted (see the package comment). nil:
	// the lease alone decides (fxdesk-cron never fills; tests of other parts).
	Watch Watch
}

// Gate admits or drops lease-guarded work. It is safe for concurrent use, and cheap on the
// admitting path (one HoldsLease read), which the tick path takes on every tick.
type Gate struct {
	lease   Lease
	watch   Watch // nil: no risk view to wait for
	log     *slog.Logger
	dropped [numWork][3]prometheus.Counter // [work][atGate, atFence, atRiskView]; atRiskView for Fill only
	quiet   [numWork]atomic.Bool           // a periodic kind's run of drops was already logged
}

const (
	atGate = iota
	atFence
	atRiskView
)

// watched is the work that needs the risk view loaded: what opens a position or rests an order
// the engine must watch. A close needs no watch (it ends one, and the engine replays it onto the
// view it loads), nor does the engine's own work (it runs only once the view is loaded).
func (w Work) watched() bool { return w == Fill }

// New returns a gate; it refuses a missing dependency.
func New(cfg Config) (*Gate, error) {
	switch {
	case cfg.Lease == nil:
		return nil, errors.New("gate: Lease is required (gate.NoLease on a process that never contends)")
	case cfg.Log == nil:
		return nil, errors.New("gate: Log is required")
	case cfg.Dropped == nil:
		return nil, errors.New("gate: Dropped is required")
	}
	g := &Gate{lease: cfg.Lease, watch: cfg.Watch, log: cfg.Log}
	for _, w := range Kinds() {
		// Made once, so every series exists at zero and a drop is one atomic add.
		g.dropped[w][atGate] = cfg.Dropped.WithLabelValues(w.String(), "gate")
		g.dropped[w][atFence] = cfg.Dropped.WithLabelValues(w.String(), "fence")
		if w.watched() && cfg.Watch != nil {
			g.dropped[w][atRiskView] = cfg.Dropped.WithLabelValues(w.String(), "risk_view")
		}
	}
	return g, nil
}

// Admit returns nil when work may start now. Otherwise it logs the drop at warning level, with
// attribute work and attrs naming what was not executed, counts it, and returns ErrNotHolder.
//
// A Fill on a process whose risk view is not loaded yet (Config.Watch) is dropped the same way
// and answers ErrRiskViewLoading; the lease is asked first, so a follower still answers
// ErrNotHolder.
func (g *Gate) Admit(ctx context.Context, w Work, attrs ...slog.Attr) error {
	if g.lease.HoldsLease() {
		if w.watched() && g.watch != nil && !g.watch.Watching() {
			g.dropped[w][atRiskView].Inc()
			g.log.LogAttrs(ctx, slog.LevelWarn, "risk view not loaded yet; fill refused", append([]slog.Attr{slog.String("work", w.String())}, attrs...)...)
			return ErrRiskViewLoading
		}
		if g.quiet[w].Load() {
			g.quiet[w].Store(false)
		}
		return nil
	}
	g.dropped[w][atGate].Inc()
	if w.periodic() && g.quiet[w].Swap(true) {
		return ErrNotHolder
	}
	head := []slog.Attr{slog.String("work", w.String())}
	if w.periodic() {
		head = append(head, slog.String("further", "counted, not logged, until this work is admitted again"))
	}
	g.log.LogAttrs(ctx, slog.LevelWarn, "lease not confirmed; work not executed", append(head, attrs...)...)
	return ErrNotHolder
}

// Fenced reports a write of work that the term fence refused inside its transaction (cause is
// the fence's error): it logs and counts the drop like Admit and returns ErrNotHolder wrapping
// cause.
func (g *Gate) Fenced(ctx context.Context, w Work, cause error, attrs ...slog.Attr) error {
	g.dropped[w][atFence].Inc()
	g.log.LogAttrs(ctx, slog.LevelWarn, "lease fence refused the write; work not executed",
		append([]slog.Attr{slog.String("work", w.String()), slog.Any("err", cause)}, attrs...)...)
	return fmt.Errorf("%w: %w", ErrNotHolder, cause)
}
