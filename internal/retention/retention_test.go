package retention

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// rows is a task over an in-memory table of n rows past their horizon: the runner's logic
// alone, the tables' own tasks are tested against the database in their packages.
type rows struct {
	n, left int64
	batches []int
	planErr error
	onStep  func()
	planned int
}

func (r *rows) Name() string { return "rows" }
func (r *rows) Plan(context.Context) (int64, error) {
	r.planned++
	r.left = r.n
	return r.n, r.planErr
}
func (r *rows) Step(_ context.Context, batch int) (int64, int64, error) {
	r.batches = append(r.batches, batch)
	k := min(int64(batch), r.left)
	r.left -= k
	r.n -= k
	if r.onStep != nil {
		r.onStep()
	}
	return k, r.left, nil
}

// A pass handles the whole backlog in batches of at most Batch rows, and the progress says
// what was done; a pass that loses the lease stops before its next batch and counts as failed,
// leaving the backlog for the next; a failed plan is counted and the next task still runs.
func TestRunnerBatchesAndReports(t *testing.T) {
	t.Parallel()
	holding := true
	a, b := &rows{n: 10_500}, &rows{n: 3}
	r, err := New(Config{Tasks: []Task{a, b}, Batch: 2000, Holding: func() bool { return holding }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r.Pass(context.Background())
	if len(a.batches) != 6 || a.n != 0 || b.n != 0 {
		t.Fatalf("batches %v, left %d and %d; want 6 batches and nothing left", a.batches, a.n, b.n)
	}
	p := r.Progress()
	if p[0].Handled != 10_500 || p[0].Backlog != 0 || p[0].LastBatchRows != 500 || p[0].LastBatchAt.IsZero() || p[0].Passes != 1 || p[1].Handled != 3 {
		t.Fatalf("progress %+v", p)
	}

	// The lease goes after the second batch of the next pass.
	a.n, a.batches = 9000, nil
	a.onStep = func() {
		if len(a.batches) == 2 {
			holding = false
		}
	}
	r.Pass(context.Background())
	p = r.Progress()
	if len(a.batches) != 2 || p[0].Backlog != 5000 || p[0].Failures != 1 || p[0].Passes != 1 || b.planned != 1 {
		t.Fatalf("after losing the lease: batches %v, progress %+v, second task planned %d times", a.batches, p, b.planned)
	}

	holding, a.onStep = true, nil
	a.planErr = errors.New("database gone")
	r.Pass(context.Background())
	if p = r.Progress(); p[0].Failures != 2 || b.planned != 2 {
		t.Fatalf("after a failed plan: progress %+v, second task planned %d times", p, b.planned)
	}
	for _, bad := range []Config{{Log: nil}, {Batch: MaxBatch + 1, Log: slog.New(slog.DiscardHandler)}, {Tasks: []Task{nil}, Log: slog.New(slog.DiscardHandler)}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) took it", bad)
		}
	}
}

// A slow batch halves the next, down to MinBatch; a quick one doubles it, up to the configured
// batch; one near the target keeps its size.
func TestBatchFollowsTheTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		size, most int
		took       time.Duration
		want       int
	}{
		{1000, 1000, 3 * time.Second, 500},
		{80, 1000, time.Second, MinBatch},
		{MinBatch, 1000, time.Second, MinBatch},
		{30, 30, time.Second, 30}, // a configured batch below MinBatch is never raised
		{500, 1000, 10 * time.Millisecond, 1000},
		{1000, 1000, 10 * time.Millisecond, 1000},
		{400, 1000, 200 * time.Millisecond, 400},
	} {
		if got := nextBatch(c.size, c.most, c.took); got != c.want {
			t.Errorf("nextBatch(%d, %d, %s) = %d, want %d", c.size, c.most, c.took, got, c.want)
		}
	}
}
