package schedule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRunOnceRecordsAndLogsCounts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	at := time.Date(2026, 11, 25, 17, 0, 0, 0, NewYork())
	var gotAt time.Time
	s, err := New(log, NewYork(), Job{
		Name: "count", Spec: "@every 1h", Comment: "counts",
		Run: func(ctx context.Context, when time.Time) (Result, error) {
			gotAt = when
			return Result{"charged": 3, "pending": 1}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunOnce(context.Background(), "count", at); err != nil {
		t.Fatal(err)
	}
	if !gotAt.Equal(at) {
		t.Errorf("job ran as of %v, want %v", gotAt, at)
	}
	st := s.States()[0]
	if !st.LastOK || st.Result["charged"] != 3 || st.LastStart == nil {
		t.Errorf("state = %+v", st)
	}
	if !strings.Contains(buf.String(), "charged=3") || !strings.Contains(buf.String(), "pending=1") {
		t.Errorf("counts not logged: %s", buf.String())
	}
	if _, err := s.RunOnce(context.Background(), "nope", at); err == nil {
		t.Error("unknown job ran")
	}
}

func TestAJobNeverOverlapsItself(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	s, err := New(log, NewYork(), Job{
		Name: "slow", Spec: "@every 1h", Comment: "blocks",
		Run: func(ctx context.Context, _ time.Time) (Result, error) {
			started <- struct{}{}
			<-release
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := s.jobs["slow"]
	done := make(chan struct{})
	go func() { s.fire(e); close(done) }()
	<-started
	s.fire(e) // returns at once: the first run holds the job
	if got := s.States()[0].Skipped; got != 1 {
		t.Fatalf("skipped = %d, want 1", got)
	}
	close(release)
	<-done
	if len(started) != 0 {
		t.Fatal("a second instance started while the first ran")
	}
}

func TestDeclinedIsLoggedWithReason(t *testing.T) {
	var buf bytes.Buffer
	s, _ := New(slog.New(slog.NewTextHandler(&buf, nil)), NewYork(), Job{
		Name: "venue", Spec: "@every 1m", Comment: "declines",
		Run: func(context.Context, time.Time) (Result, error) {
			return nil, fmt.Errorf("%w: runs on the lease holder", ErrDeclined)
		},
	})
	_, err := s.RunOnce(context.Background(), "venue", time.Now())
	if !errors.Is(err, ErrDeclined) || !strings.Contains(buf.String(), "job declined") || !strings.Contains(buf.String(), "lease holder") {
		t.Fatalf("err=%v log=%s", err, buf.String())
	}
}

func TestBadSpecIsRefused(t *testing.T) {
	_, err := New(slog.New(slog.DiscardHandler), NewYork(), Job{Name: "x", Spec: "every hour", Run: func(context.Context, time.Time) (Result, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "every hour") {
		t.Fatalf("err = %v", err)
	}
}
