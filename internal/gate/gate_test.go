package gate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
)

type switchLease struct{ held atomic.Bool }

func (l *switchLease) HoldsLease() bool { return l.held.Load() }

// rig is a gate over a lease the test switches, with its log in a buffer and its own series.
type rig struct {
	lease   *switchLease
	logs    *bytes.Buffer
	dropped *prometheus.CounterVec
	g       *gate.Gate
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{lease: &switchLease{}, logs: &bytes.Buffer{}, dropped: gate.NewDropped()}
	g, err := gate.New(gate.Config{Lease: r.lease, Log: slog.New(slog.NewJSONHandler(r.logs, nil)), Dropped: r.dropped})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	return r
}

// warnings returns the gate's warnings for work.
func (r *rig) warnings(t *testing.T, w gate.Work) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["work"] == w.String() && rec["level"] == "WARN" {
			out = append(out, rec)
		}
	}
	return out
}

// Every kind of work is admitted while the lease is held, and dropped, logged with its name and
// counted once the lease is not; the error is the one the API answers 503 with.
func TestEveryKindIsDroppedLoggedAndCounted(t *testing.T) {
	t.Parallel()
	for _, w := range gate.Kinds() {
		t.Run(w.String(), func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			ctx := context.Background()
			r.lease.held.Store(true)
			if err := r.g.Admit(ctx, w); err != nil {
				t.Fatalf("held: Admit = %v", err)
			}
			r.lease.held.Store(false)
			err := r.g.Admit(ctx, w, slog.Int64("position_id", 7))
			if !errors.Is(err, gate.ErrNotHolder) {
				t.Fatalf("not held: Admit = %v, want ErrNotHolder", err)
			}
			if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
				t.Fatalf("ErrNotHolder answers %s %q", fx.ErrorCode(err), fx.ErrorMessage(err))
			}
			logs := r.warnings(t, w)
			if len(logs) != 1 || logs[0]["position_id"] != float64(7) {
				t.Fatalf("warnings for %s: %v (log: %s)", w, logs, r.logs)
			}
			if n := testutil.ToFloat64(r.dropped.WithLabelValues(w.String(), "gate")); n != 1 {
				t.Fatalf("fxdesk_gate_dropped_total{work=%q,at=gate} = %v, want 1", w, n)
			}
		})
	}
}

// Work that recurs on every tick or timer is counted on every drop but logged once per run of
// drops, so a lease lost for good does not log every tick; admission starts a new run.
func TestPeriodicWorkLogsOncePerGap(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	for range 3 {
		r.g.Admit(ctx, gate.RiskTick)
	}
	r.lease.held.Store(true)
	r.g.Admit(ctx, gate.RiskTick)
	r.lease.held.Store(false)
	r.g.Admit(ctx, gate.RiskTick)
	if logs := r.warnings(t, gate.RiskTick); len(logs) != 2 {
		t.Fatalf("%d warnings over two gaps, want 2: %s", len(logs), r.logs)
	}
	if n := testutil.ToFloat64(r.dropped.WithLabelValues("risk_tick", "gate")); n != 4 {
		t.Fatalf("counted %v drops, want 4", n)
	}
	// A discrete kind names every drop: each is a different position or order.
	for range 2 {
		r.g.Admit(ctx, gate.Close)
	}
	if logs := r.warnings(t, gate.Close); len(logs) != 2 {
		t.Fatalf("%d warnings for two dropped closes, want 2", len(logs))
	}
}

// A write the fence refused answers the same error, is logged with its cause and counted at
// "fence".
func TestFencedIsReportedLikeADrop(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	cause := errors.New("fence refusal")
	err := r.g.Fenced(context.Background(), gate.Fill, cause)
	if !errors.Is(err, gate.ErrNotHolder) || !errors.Is(err, cause) || fx.ErrorMessage(err) != fx.MsgPricingUnavailable {
		t.Fatalf("Fenced = %v", err)
	}
	if logs := r.warnings(t, gate.Fill); len(logs) != 1 || logs[0]["err"] != "fence refusal" {
		t.Fatalf("warnings: %s", r.logs)
	}
	if n := testutil.ToFloat64(r.dropped.WithLabelValues("fill", "fence")); n != 1 {
		t.Fatalf("fence drops = %v", n)
	}
}

func TestNewRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	for name, cfg := range map[string]gate.Config{
		"Lease":   {Log: log, Dropped: gate.NewDropped()},
		"Log":     {Lease: gate.NoLease, Dropped: gate.NewDropped()},
		"Dropped": {Lease: gate.NoLease, Log: log},
	} {
		if _, err := gate.New(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: %v", name, err)
		}
	}
}

type switchWatch struct{ on atomic.Bool }

func (w *switchWatch) Watching() bool { return w.on.Load() }

// A fill waits for the risk view that will watch it: on a holder whose view is still loading it
// is refused with the risk view's own 503 and counted at "risk_view"; every other kind of work,
// the engine's own included, needs only the lease; and a process that does not hold the lease
// still answers ErrNotHolder, whatever its view.
func TestFillWaitsForTheRiskView(t *testing.T) {
	t.Parallel()
	lease, watch, dropped := &switchLease{}, &switchWatch{}, gate.NewDropped()
	logs := &bytes.Buffer{}
	g, err := gate.New(gate.Config{Lease: lease, Watch: watch, Log: slog.New(slog.NewJSONHandler(logs, nil)), Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Admit(ctx, gate.Fill); !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("fill without the lease = %v, want ErrNotHolder", err)
	}
	lease.held.Store(true)
	err = g.Admit(ctx, gate.Fill, slog.Int64("account_id", 9))
	if !errors.Is(err, gate.ErrRiskViewLoading) || errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("fill while the view loads = %v, want ErrRiskViewLoading", err)
	}
	if fx.ErrorCode(err) != fx.EUNAVAILABLE || fx.ErrorMessage(err) != fx.MsgRiskViewLoading {
		t.Fatalf("ErrRiskViewLoading answers %s %q", fx.ErrorCode(err), fx.ErrorMessage(err))
	}
	if !strings.Contains(logs.String(), `"msg":"risk view not loaded yet; fill refused"`) || !strings.Contains(logs.String(), `"account_id":9`) {
		t.Fatalf("log: %s", logs)
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues("fill", "risk_view")); n != 1 {
		t.Fatalf(`fxdesk_gate_dropped_total{work="fill",at="risk_view"} = %v, want 1`, n)
	}
	for _, w := range gate.Kinds() {
		if w == gate.Fill {
			continue
		}
		if err := g.Admit(ctx, w); err != nil {
			t.Errorf("%s while the view loads = %v, want admitted", w, err)
		}
	}
	watch.on.Store(true)
	if err := g.Admit(ctx, gate.Fill); err != nil {
		t.Fatalf("fill once the view is loaded = %v", err)
	}
}
