package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// A Task is one table's retention, done a batch at a time by a Runner.
type Task interface {
	// Name names the table in logs and metrics: "events", "audit", "candles".
	Name() string
	// Plan starts a pass: it reads how far the horizon lets this pass go and returns how many
	// rows that leaves to handle (an estimate where the keys have gaps).
	Plan(ctx context.Context) (backlog int64, err error)
	// Step handles the pass's next batch of at most batch rows and returns how many rows it
	// handled and how many the pass has left (0: the pass is done).
	Step(ctx context.Context, batch int) (handled, left int64, err error)
}

// Config builds a Runner.
type Config struct {
	Tasks []Task
	// Every is the time between two passes' starts (DefaultEvery when 0).
	Every time.Duration
	// Batch is the most rows one statement handles (DefaultBatch when 0, at most MaxBatch).
	Batch int
	// Pause is the least wait after each batch of a pass that has more (0: none; config's default
	// is DefaultPause); the wait is at least as long as the batch took, so a pass never holds
	// more than half of the database's time however slow the server is at that moment, and the
	// desk's own writes, InnoDB's purge and the replicas keep up however long the backlog.
	Pause time.Duration
	// Holding reports whether this process may run a pass (the lease is trusted); nil: always.
	Holding func() bool
	Log     *slog.Logger
}

// BatchTarget is how long a batch should take: a batch slower than it halves the next one's
// rows (down to MinBatch), one faster than half of it doubles them (up to Batch). The rows bound
// a statement's locks and undo; the time bounds how long it holds the server's I/O, which the
// relay's and the fills' commits share — on a busy server a batch of Batch rows that must read
// its pages from disk can take seconds.
const BatchTarget = 250 * time.Millisecond

// MinBatch is the fewest rows a batch shrinks to.
const MinBatch = 50

const (
	DefaultEvery = time.Hour
	DefaultBatch = 1000
	MaxBatch     = 5000
	DefaultPause = 100 * time.Millisecond
)

// Progress is one task's work as the metrics show it.
type Progress struct {
	Task string
	// Handled is the rows the task pruned or archived since the process started.
	Handled int64
	// Backlog is the rows its current or last pass had left (0 once a pass finished).
	Backlog int64
	// LastBatchRows, LastBatchDuration and LastBatchAt describe its last batch (zero before one).
	LastBatchRows     int64
	LastBatchDuration time.Duration
	LastBatchAt       time.Time
	// Passes counts finished passes, Failures failed ones.
	Passes, Failures int64
}

// Runner runs the tasks' passes, one task and one batch at a time.
type Runner struct {
	cfg Config

	mu       sync.Mutex
	progress []Progress // by task, in cfg.Tasks order
}

// New validates cfg.
func New(cfg Config) (*Runner, error) {
	if cfg.Log == nil {
		return nil, errors.New("retention: a runner needs Log")
	}
	if cfg.Every == 0 {
		cfg.Every = DefaultEvery
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Every < 0 || cfg.Batch < 1 || cfg.Batch > MaxBatch || cfg.Pause < 0 {
		return nil, fmt.Errorf("retention: every %s, batch %d (1..%d) and pause %s must be positive", cfg.Every, cfg.Batch, MaxBatch, cfg.Pause)
	}
	if cfg.Holding == nil {
		cfg.Holding = func() bool { return true }
	}
	r := &Runner{cfg: cfg}
	for _, t := range cfg.Tasks {
		if t == nil {
			return nil, errors.New("retention: a nil task")
		}
		r.progress = append(r.progress, Progress{Task: t.Name()})
	}
	return r, nil
}

// Progress returns every task's progress.
func (r *Runner) Progress() []Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Progress(nil), r.progress...)
}

func (r *Runner) update(i int, f func(p *Progress)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.progress[i])
}

// Run makes a pass at once and then every Every until ctx ends. A failed pass is logged and
// made again at the next; a process without tasks waits for ctx.
func (r *Runner) Run(ctx context.Context) error {
	if len(r.cfg.Tasks) == 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	for {
		r.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass runs one pass of every task, in order, while the lease is trusted.
func (r *Runner) Pass(ctx context.Context) {
	for i, task := range r.cfg.Tasks {
		if ctx.Err() != nil || !r.cfg.Holding() {
			return
		}
		if err := r.pass(ctx, i, task); err != nil && ctx.Err() == nil {
			r.update(i, func(p *Progress) { p.Failures++ })
			r.cfg.Log.WarnContext(ctx, "retention: pass failed; made again at the next", slog.String("task", task.Name()), slog.Any("err", err))
		}
	}
}

func (r *Runner) pass(ctx context.Context, i int, task Task) error {
	left, err := task.Plan(ctx)
	if err != nil {
		return err
	}
	r.update(i, func(p *Progress) { p.Backlog = left })
	if left <= 0 {
		r.update(i, func(p *Progress) { p.Passes++ })
		return nil
	}
	start := time.Now()
	r.cfg.Log.InfoContext(ctx, "retention: pass started", slog.String("task", task.Name()), slog.Int64("backlog", left))
	var done int64
	size := r.cfg.Batch
	for left > 0 {
		if !r.cfg.Holding() {
			return fmt.Errorf("%s: the lease is not trusted; %d rows left for the next pass", task.Name(), left)
		}
		t0 := time.Now()
		n, l, err := task.Step(ctx, size)
		took := time.Since(t0)
		size = nextBatch(size, r.cfg.Batch, took)
		done += n
		left = l
		r.update(i, func(p *Progress) {
			p.Handled += n
			p.Backlog = left
			p.LastBatchRows, p.LastBatchDuration, p.LastBatchAt = n, took, t0.Add(took)
		})
		if err != nil {
			return err
		}
		if left > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(max(r.cfg.Pause, took)):
			}
		}
	}
	r.update(i, func(p *Progress) { p.Passes++ })
	r.cfg.Log.InfoContext(ctx, "retention: pass done", slog.String("task", task.Name()), slog.Int64("rows", done),
		slog.Duration("took", time.Since(start).Round(time.Millisecond)))
	return nil
}

// nextBatch is the rows of the batch after one of size rows that took took, at most most.
func nextBatch(size, most int, took time.Duration) int {
	switch {
	case took > BatchTarget:
		return max(size/2, min(MinBatch, most))
	case took < BatchTarget/2:
		return min(size*2, most)
	}
	return size
}
