package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
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
