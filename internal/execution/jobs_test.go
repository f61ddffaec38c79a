package execution_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/execution"
	"fxdesk/internal/gate"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// The venue jobs of a process that does not hold the lease are dropped at the gate on every
// run: counted each time, logged once per gap, and nothing else happens.
func TestVenueJobsAreDroppedAtTheGate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	logs := &dbtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dropped := gate.NewDropped()
	lease := &gatetest.Lease{}
	lease.Lose()
	g, err := gate.New(gate.Config{Lease: lease, Log: log, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := execution.NewReconciler(execution.ReconcilerConfig{Venue: e.client, Closer: e.sender, Desk: e.desk.ABook(), Gate: g, Alerts: e.inbox,
		Account: e.sim.AccountID(), Plan: execution.Config{NotSentAfter: time.Minute}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	hedge, err := execution.NewHedgeMonitor(execution.HedgeConfig{Venue: e.client, Desk: e.desk.ABook(), Gate: g, Alerts: e.inbox, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	jobs := &execution.Jobs{Reconciler: rec, Hedge: hedge, Every: time.Millisecond, Log: log}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- jobs.Run(ctx) }()
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
		t.Fatalf("Jobs.Run = %v", err)
	}
	for _, w := range []string{"execution_reconciler", "hedge_monitor"} {
		if n := strings.Count(logs.String(), "level=WARN msg=\"lease not confirmed; work not executed"); n < 2 || !strings.Contains(logs.String(), "work="+w) {
			t.Fatalf("no gate warning for %s:\n%s", w, logs)
		}
		if n := strings.Count(logs.String(), "work="+w); n != 1 {
			t.Fatalf("%d warnings for %s over one gap, want 1:\n%s", n, w, logs)
		}
	}
	if strings.Contains(logs.String(), "venue job failed") {
		t.Fatalf("a run dropped at the gate was logged as a failure:\n%s", logs)
	}
}
