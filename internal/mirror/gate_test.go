package mirror_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/gate"
	"fxdesk/internal/mirror"
	"fxdesk/internal/testkit/gatetest"
)

// newGate is a real gate over l, logging to e's log, counting in its own series.
func newGate(e *env, l gate.Lease) (*gate.Gate, *prometheus.CounterVec) {
	e.t.Helper()
	dropped := gate.NewDropped()
	g, err := gate.New(gate.Config{Lease: l, Log: e.log, Dropped: dropped})
	if err != nil {
		e.t.Fatal(err)
	}
	return g, dropped
}

// mustPublisher builds cfg's publisher; a test that does not name a gate gets one that admits.
func mustPublisher(e *env, cfg mirror.SnapshotPublisherConfig) *mirror.SnapshotPublisher {
	e.t.Helper()
	if cfg.Gate == nil {
		cfg.Gate, _ = newGate(e, &gatetest.Lease{})
	}
	p, err := mirror.NewSnapshotPublisher(cfg, e.log)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func mustFollower(e *env, cfg mirror.SnapshotFollowerConfig) *mirror.SnapshotFollower {
	e.t.Helper()
	f, err := mirror.NewSnapshotFollower(cfg, e.log)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// A publish on a process whose lease is not confirmed is dropped at the gate: nothing is written,
// the drop is logged with work=mirror_publish and counted, and publishing resumes once the lease
// is confirmed again.
func TestPublishIsDroppedAtTheGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.src.Set("EURUSD", 1.1, 1.1002, time.Now())
	l := &gatetest.Lease{}
	l.Lose()
	g, dropped := newGate(e, l)
	pub := e.publisher(func(c *mirror.SnapshotPublisherConfig) { c.Gate = g })
	if err := pub.PublishOnce(ctx); !errors.Is(err, gate.ErrNotHolder) {
		t.Fatalf("PublishOnce with the gate shut = %v, want gate.ErrNotHolder", err)
	}
	if n, err := e.rdb.Exists(ctx, e.keys.Snapshot).Result(); err != nil || n != 0 {
		t.Fatalf("snapshot key written with the gate shut: exists=%d err=%v", n, err)
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues("mirror_publish", "gate")); n != 1 {
		t.Fatalf("fxdesk_gate_dropped_total{work=mirror_publish} = %v, want 1", n)
	}
	if !strings.Contains(e.logs.String(), `"work":"mirror_publish"`) {
		t.Fatalf("no gate warning naming mirror_publish:\n%s", e.logs.String())
	}
	l.Restore()
	must(t, pub.PublishOnce(ctx))
	if n, _ := e.rdb.Exists(ctx, e.keys.Snapshot).Result(); n != 1 {
		t.Fatal("no snapshot once the gate admitted the publish")
	}
}

// The constructors refuse a config that Run could only fail on later.
func TestConstructorsRefuseMissingDependencies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	g, _ := newGate(e, &gatetest.Lease{})
	set := func([]string) error { return nil }
	for name, cfg := range map[string]mirror.SnapshotPublisherConfig{
		"Redis":     {Quotes: e.src, SetPinned: set, Gate: g},
		"Quotes":    {Redis: e.rdb, SetPinned: set, Gate: g},
		"SetPinned": {Redis: e.rdb, Quotes: e.src, Gate: g},
		"Gate":      {Redis: e.rdb, Quotes: e.src, SetPinned: set},
	} {
		if _, err := mirror.NewSnapshotPublisher(cfg, e.log); err == nil {
			t.Errorf("NewPublisher without %s: no error", name)
		}
	}
	if _, err := mirror.NewSnapshotFollower(mirror.SnapshotFollowerConfig{}, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("NewFollower without Redis: no error")
	}
}
