package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"fxdesk/internal/lifecycle"
	"fxdesk/internal/testkit/dbtest"
)

// A part that returns an error, or returns nil before its stage stops, fails the group with an
// error log naming it; parts that return when told to stop do not.
func TestPartReturningAnErrorOrEarlyFailsTheGroup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		run  func(context.Context) error
		want string
	}{
		{"returns an error", func(context.Context) error { return errors.New("boom") }, "boom"},
		{"returns early", func(context.Context) error { return nil }, "stopped before"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			logs := &dbtest.LogBuffer{}
			g := lifecycle.New(slog.New(slog.NewTextHandler(logs, nil)))
			s := g.Stage()
			s.Go("quote mirror publisher", c.run)
			<-g.Failed()
			s.Stop()
			if err := g.Err(); err == nil || !strings.Contains(err.Error(), "quote mirror publisher") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Err = %v", err)
			}
			if !strings.Contains(logs.String(), `level=ERROR msg="part failed; stopping the process" part="quote mirror publisher"`) {
				t.Fatalf("no error log naming the part:\n%s", logs)
			}
		})
	}
}

// Stages stop in the order the process chooses: a later stage's parts still run while an
// earlier stage stops.
func TestStagesStopInOrder(t *testing.T) {
	t.Parallel()
	g := lifecycle.New(slog.New(slog.DiscardHandler))
	first, second := g.Stage(), g.Stage()
	var mu sync.Mutex
	var order []string
	part := func(name string) func(context.Context) error {
		return func(ctx context.Context) error {
			<-ctx.Done()
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return nil
		}
	}
	second.Go("keeper", part("keeper"))
	first.Go("risk", part("risk"))
	first.Stop()
	second.Stop()
	second.Stop() // twice is harmless
	if strings.Join(order, ",") != "risk,keeper" || g.Err() != nil {
		t.Fatalf("order %v, err %v", order, g.Err())
	}
}
