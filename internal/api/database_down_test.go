package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

// A request that failed because the database could not be reached, or a Galera node of it was
// not serving, is an outage, not a defect:
// it answers 503 with the database text and Retry-After, is logged at warning and not as an
// error. A defect (any other failure) still answers 500 and is logged as one.
func TestDatabaseUnreachableIs503(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		msg    string
		level  string
	}{
		{fmt.Errorf("load instruments: %w", mysql.ErrInvalidConn), http.StatusServiceUnavailable, fx.MsgDatabaseUnavailable, "level=WARN"},
		{fmt.Errorf("dial: %w", &netErr{}), http.StatusServiceUnavailable, fx.MsgDatabaseUnavailable, "level=WARN"},
		// A Galera node outside the primary component, as the cluster soak met it mid-failover.
		{fmt.Errorf("load account 1: %w", &mysql.MySQLError{Number: 1047, SQLState: [5]byte{'0', '8', 'S', '0', '1'},
			Message: "WSREP has not yet prepared node for application use"}), http.StatusServiceUnavailable, fx.MsgDatabaseUnavailable, "level=WARN"},
		{fmt.Errorf("lost: %w", &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgOutcomeUnknown}), http.StatusGatewayTimeout, fx.MsgOutcomeUnknown, ""},
		{fmt.Errorf("a defect"), http.StatusInternalServerError, "An internal error occurred.", "level=ERROR"},
	} {
		logs := &dbtest.LogBuffer{}
		rec := httptest.NewRecorder()
		writeError(context.Background(), slog.New(slog.NewTextHandler(logs, nil)), rec, tc.err)
		var body errorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || body.Error.Message != tc.msg {
			t.Errorf("%v: answered %d %q, want %d %q", tc.err, rec.Code, body.Error.Message, tc.status, tc.msg)
		}
		if tc.status == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
			t.Errorf("%v: a 503 without Retry-After", tc.err)
		}
		if tc.level != "" && !strings.Contains(logs.String(), tc.level) {
			t.Errorf("%v: logged %q, want %s", tc.err, logs.String(), tc.level)
		}
		if tc.level == "level=WARN" && strings.Contains(logs.String(), "level=ERROR") {
			t.Errorf("%v: an outage logged as an error: %s", tc.err, logs.String())
		}
	}
}

// netErr is a network failure as the driver reports a refused or cut connection.
type netErr struct{}

func (*netErr) Error() string   { return "connection refused" }
func (*netErr) Timeout() bool   { return false }
func (*netErr) Temporary() bool { return false }
