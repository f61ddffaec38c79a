package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/fx"
)

// Each classifier answers for its own server error number only, through wrapping, and never for
// an error that did not come from the server.
func TestClassifyServerErrors(t *testing.T) {
	t.Parallel()
	server := func(n uint16) error {
		return fmt.Errorf("claim lease: %w", &mysql.MySQLError{Number: n, Message: "from the server"})
	}
	classifiers := map[string]func(error) bool{
		"IsDuplicateKey":    IsDuplicateKey,
		"IsDeadlock":        IsDeadlock,
		"IsLockWaitTimeout": IsLockWaitTimeout,
	}
	for _, tc := range []struct {
		err  error
		want string // the one classifier that must answer true, "" for none
	}{
		{server(1062), "IsDuplicateKey"},
		{server(1213), "IsDeadlock"},
		{server(1205), "IsLockWaitTimeout"},
		{server(1064), ""}, // a syntax error is none of them
		{errors.New("dial tcp: connection refused"), ""},
		{nil, ""},
	} {
		for name, is := range classifiers {
			if got := is(tc.err); got != (name == tc.want) {
				t.Errorf("%s(%v) = %v", name, tc.err, got)
			}
		}
		if tc.err != nil && Unreachable(tc.err) == errors.As(tc.err, new(*mysql.MySQLError)) {
			t.Errorf("Unreachable(%v) = %v", tc.err, Unreachable(tc.err))
		}
	}
}

// A transaction the server rolls back is run again, five times in all; past them the answer is
// a refusal a client can act on (fx.EUNAVAILABLE, retry) that still carries the server's error.
// Any other error, or success, ends the retries at once, and so does the context ending.
func TestRetryRolledBack(t *testing.T) {
	t.Parallel()
	server := func(n uint16) error { return fmt.Errorf("place order: %w", &mysql.MySQLError{Number: n}) }
	for _, tc := range []struct {
		name     string
		fails    []error // the errors of the attempts, in order; success after them
		attempts int
		code     string // fx code of the answer, "" for success
	}{
		{"deadlock then success", []error{server(1213)}, 2, ""},
		{"lock wait then deadlock then success", []error{server(1205), server(1213)}, 3, ""},
		{"deadlocks past the retries", []error{server(1213), server(1213), server(1213), server(1213), server(1213), server(1213)}, 5, fx.EUNAVAILABLE},
		{"a duplicate key is not retried", []error{server(1062)}, 1, fx.EINTERNAL},
		{"a rule's refusal is not retried", []error{fx.Errorf(fx.ECONFLICT, "no")}, 1, fx.ECONFLICT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := 0
			err := RetryRolledBack(context.Background(), func() error {
				n++
				if n <= len(tc.fails) {
					return tc.fails[n-1]
				}
				return nil
			})
			if n != tc.attempts {
				t.Errorf("ran %d times, want %d", n, tc.attempts)
			}
			switch {
			case tc.code == "" && err != nil:
				t.Errorf("answer %v, want success", err)
			case tc.code != "" && fx.ErrorCode(err) != tc.code:
				t.Errorf("answer %v (code %s), want code %s", err, fx.ErrorCode(err), tc.code)
			}
			if tc.code == fx.EUNAVAILABLE && (fx.ErrorMessage(err) != fx.MsgContended || !IsDeadlock(err)) {
				t.Errorf("exhausted answer %v: want MsgContended with the server's deadlock in its chain", err)
			}
		})
	}

	t.Run("context ended", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err := RetryRolledBack(ctx, func() error {
			n++
			cancel()
			return server(1213)
		})
		if n != 1 || fx.ErrorCode(err) != fx.EUNAVAILABLE || !IsDeadlock(err) {
			t.Fatalf("after the context ended: ran %d times, answer %v", n, err)
		}
	})
}
