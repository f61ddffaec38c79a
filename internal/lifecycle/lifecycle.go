// Package lifecycle runs a process's long-lived parts and reads every part's Run(ctx) error
// (docs/architecture.md, «Processes and roles»): a part that fails — returns an error, or returns
// at all before it was told to stop — is logged at error level naming it and fails the whole group,
// so the process shuts down and exits non-zero instead of running on without it.
//
// Parts run in stages, and the process stops the stages in the order it chooses (the web
// process: guarded work, then the price stream, then the lease keeper, then release). A stage's
// context is not the signal context: it ends only when the process stops that stage.
//
// golang.org/x/sync/errgroup would cancel every part at once on the first failure; the desk
// needs the ordered stop, so this is the small group it needs.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Group is one process's set of stages.
type Group struct {
	log    *slog.Logger
	failed chan struct{}
	once   sync.Once
	err    error // the first failure; read after Failed is closed
}

// New returns an empty group that logs failures to log.
func New(log *slog.Logger) *Group {
	return &Group{log: log, failed: make(chan struct{})}
}

// Failed is closed when the first part fails.
func (g *Group) Failed() <-chan struct{} { return g.failed }

// Err is the first part's failure, naming the part, or nil while none failed.
func (g *Group) Err() error {
	select {
	case <-g.failed:
		return g.err
	default:
		return nil
	}
}

func (g *Group) fail(part string, err error) {
	g.log.Error("part failed; stopping the process", slog.String("part", part), slog.Any("err", err))
	g.once.Do(func() {
		g.err = fmt.Errorf("%s: %w", part, err)
		close(g.failed)
	})
}

// Stage is a set of parts started and stopped together.
type Stage struct {
	g      *Group
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Stage returns a new, empty stage of g.
func (g *Group) Stage() *Stage {
	ctx, cancel := context.WithCancel(context.Background())
	return &Stage{g: g, ctx: ctx, cancel: cancel}
}

// errStoppedEarly is the failure of a part that returned nil before its stage was stopped.
var errStoppedEarly = errors.New("stopped before the process asked it to")

// Go runs part in the stage until the stage is stopped. run must return when its context ends.
func (s *Stage) Go(part string, run func(context.Context) error) {
	s.wg.Go(func() {
		err := run(s.ctx)
		switch {
		case err != nil:
			s.g.fail(part, err)
		case s.ctx.Err() == nil:
			s.g.fail(part, errStoppedEarly)
		}
	})
}

// Stop ends the stage's context and waits for its parts to return. It may be called more than
// once, and on a stage that never ran a part.
func (s *Stage) Stop() {
	s.cancel()
	s.wg.Wait()
}
