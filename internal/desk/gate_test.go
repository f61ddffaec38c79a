package desk_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/testkit/dbtest"
)

// The venue jobs of a web process that does not hold the lease are dropped at the gate on every
// run: counted each time, logged once per gap, and nothing else happens.
func TestVenueJobsAreDroppedAtTheGate(t *testing.T) {
	t.Parallel()
	logs := &dbtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dropped := gate.NewDropped()
	// A keeper that never claimed does not hold the lease.
	keeper := lease.New(nil, nil, lease.Config{Hostname: "desk-test", PID: 1}, log)
	g, err := gate.New(gate.Config{Lease: keeper, Log: log, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	dk, err := desk.NewWeb(nil, nil, keeper, g, desk.Config{Process: "web"}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dk.RunVenueJobs(ctx, time.Millisecond, "") }()
	deadline := time.After(10 * time.Second)
	for _, w := range []gate.Work{gate.ExecutionReconciler, gate.HedgeMonitor} {
		for testutil.ToFloat64(dropped.WithLabelValues(w.String(), "gate")) < 2 {
			select {
			case <-deadline:
				t.Fatalf("%s not dropped twice; log:\n%s", w, logs)
			case <-time.After(time.Millisecond):
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunVenueJobs = %v", err)
	}
	for _, w := range []string{"execution_reconciler", "hedge_monitor"} {
		if n := strings.Count(logs.String(), "level=WARN msg=\"lease not confirmed; work not executed"); n < 2 || !strings.Contains(logs.String(), "work="+w) {
			t.Fatalf("no gate warning for %s:\n%s", w, logs)
		}
		if n := strings.Count(logs.String(), "work="+w); n != 1 {
			t.Fatalf("%d warnings for %s over one gap, want 1:\n%s", n, w, logs)
		}
	}
}

func TestNewWebNeedsKeeperAndGate(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	if _, err := desk.NewWeb(nil, nil, nil, nil, desk.Config{}, log); err == nil {
		t.Fatal("NewWeb accepted a web desk without a keeper or gate")
	}
}
