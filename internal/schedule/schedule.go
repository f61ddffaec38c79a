// Package schedule runs the desk's scheduled jobs on robfig/cron: each job has a name, a spec,
// a one-line comment of what it does and when, and a function that runs as of an instant. A job
// never overlaps itself; every run is logged with its counts at info and remembered for the
// status page. The same jobs run in fxdesk-cron and, with CRON_MODE=inline, inside fxdesk-web.
//
// The package decides nothing about money: a job's own store makes it idempotent, so a second
// run, a second process or a crash half-way never does the work twice.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"fxdesk/internal/fx"
)

// Result is what one run did, as counts by name ("charged": 12, "pending": 1).
type Result map[string]int

// Job is one scheduled job.
type Job struct {
	Name    string // e.g. processFxSwaps
	Spec    string // cron spec, in the scheduler's location (America/New_York)
	Comment string // what it does and when, one line
	// Run does the work as of at (the scheduled instant, or --at for a one-off run).
	Run func(ctx context.Context, at time.Time) (Result, error)
}

// ErrDeclined is returned (wrapped, with the reason) by a job that refused to run here.
var ErrDeclined = errors.New("declined")

// JobState is a job's last and next run, for the status page.
type JobState struct {
	Name      string     `json:"name"`
	Spec      string     `json:"spec"`
	Comment   string     `json:"comment"`
	Running   bool       `json:"running"`
	LastStart *time.Time `json:"lastStart,omitempty"`
	LastTook  string     `json:"lastTook,omitempty"`
	LastOK    bool       `json:"lastOk"`
	LastError string     `json:"lastError,omitempty"`
	Result    Result     `json:"result,omitempty"`
	Next      *time.Time `json:"next,omitempty"`
	Skipped   int        `json:"skipped"` // runs skipped because the previous one was still going
}

// Scheduler owns the cron instance and the jobs' states.
type Scheduler struct {
	cron *cron.Cron
	log  *slog.Logger
	now  func() time.Time

	mu     sync.Mutex
	jobs   map[string]*entry
	order  []string
	ctx    context.Context
	cancel context.CancelFunc
}

type entry struct {
	job   Job
	id    cron.EntryID
	state JobState
	busy  chan struct{} // capacity 1: the run in progress holds it
}

// NewYork is the desk's scheduling location, fx's rollover zone: rollovers happen at 17:00 New
// York. It is nil when the zone cannot be loaded; New then refuses with the reason.
func NewYork() *time.Location {
	loc, _ := fx.NewYork()
	return loc
}

// New returns a scheduler for jobs, in loc. It does not start. A nil loc is refused with the
// rollover zone's load error (see NewYork).
func New(log *slog.Logger, loc *time.Location, jobs ...Job) (*Scheduler, error) {
	if loc == nil {
		_, err := fx.NewYork()
		if err == nil {
			err = errors.New("no location")
		}
		return nil, fmt.Errorf("schedule: %w", err)
	}
	s := &Scheduler{
		cron: cron.New(cron.WithLocation(loc), cron.WithLogger(cronLogger{log})),
		log:  log,
		now:  time.Now,
		jobs: map[string]*entry{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for _, j := range jobs {
		if _, dup := s.jobs[j.Name]; dup {
			return nil, fmt.Errorf("schedule: job %q registered twice", j.Name)
		}
		e := &entry{job: j, busy: make(chan struct{}, 1), state: JobState{Name: j.Name, Spec: j.Spec, Comment: j.Comment}}
		id, err := s.cron.AddFunc(j.Spec, func() { s.fire(e) })
		if err != nil {
			return nil, fmt.Errorf("schedule: job %q spec %q: %w", j.Name, j.Spec, err)
		}
		e.id = id
		s.jobs[j.Name] = e
		s.order = append(s.order, j.Name)
	}
	return s, nil
}

// fire runs a scheduled instance unless the previous one is still running.
func (s *Scheduler) fire(e *entry) {
	select {
	case e.busy <- struct{}{}:
	default:
		s.mu.Lock()
		e.state.Skipped++
		s.mu.Unlock()
		s.log.WarnContext(s.ctx, "job still running; this run skipped", slog.String("job", e.job.Name))
		return
	}
	defer func() { <-e.busy }()
	s.execute(s.ctx, e, s.now())
}

// execute runs one instance and records it.
func (s *Scheduler) execute(ctx context.Context, e *entry, at time.Time) (Result, error) {
	start := time.Now()
	s.mu.Lock()
	e.state.Running = true
	st := start.UTC()
	e.state.LastStart = &st
	s.mu.Unlock()

	res, err := e.job.Run(ctx, at)

	took := time.Since(start)
	s.mu.Lock()
	e.state.Running = false
	e.state.LastTook = took.Round(time.Millisecond).String()
	e.state.LastOK = err == nil
	e.state.Result = res
	e.state.LastError = ""
	if err != nil {
		e.state.LastError = err.Error()
	}
	s.mu.Unlock()

	attrs := []any{slog.String("job", e.job.Name), slog.Time("at", at), slog.Duration("took", took)}
	keys := make([]string, 0, len(res))
	for k := range res {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		attrs = append(attrs, slog.Int(k, res[k]))
	}
	switch {
	case errors.Is(err, ErrDeclined):
		s.log.InfoContext(ctx, "job declined", append(attrs, slog.String("reason", err.Error()))...)
	case err != nil:
		s.log.ErrorContext(ctx, "job failed", append(attrs, slog.Any("err", err))...)
	case res == nil:
		// Nothing to do (a venue job on a pure B-book desk): silent unless debugging.
		s.log.DebugContext(ctx, "job ran; nothing to do", attrs...)
	default:
		s.log.InfoContext(ctx, "job ran", attrs...)
	}
	return res, err
}

// RunOnce runs the named job once as of at, waiting if a scheduled run of it is in progress.
func (s *Scheduler) RunOnce(ctx context.Context, name string, at time.Time) (Result, error) {
	s.mu.Lock()
	e, ok := s.jobs[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no job %q (jobs: %v)", name, s.order)
	}
	select {
	case e.busy <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.busy }()
	return s.execute(ctx, e, at)
}

// Run starts the schedule and blocks until ctx ends, then waits for running jobs to finish.
func (s *Scheduler) Run(ctx context.Context) error {
	for _, name := range s.order {
		e := s.jobs[name]
		s.log.InfoContext(ctx, "job scheduled", slog.String("job", name), slog.String("spec", e.job.Spec), slog.String("what", e.job.Comment))
	}
	s.cron.Start()
	<-ctx.Done()
	s.cancel()
	<-s.cron.Stop().Done()
	return nil
}

// States returns every job's state, in registration order.
func (s *Scheduler) States() []JobState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JobState, 0, len(s.order))
	for _, name := range s.order {
		e := s.jobs[name]
		st := e.state
		if next := s.cron.Entry(e.id).Next; !next.IsZero() {
			n := next.UTC()
			st.Next = &n
		}
		out = append(out, st)
	}
	return out
}

// cronLogger sends robfig/cron's own messages to slog (its Info lines are routine: debug).
type cronLogger struct{ log *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.log.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.log.Error("cron: "+msg, append(kv, slog.Any("err", err))...)
}
