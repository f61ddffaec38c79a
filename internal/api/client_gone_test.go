package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"fxdesk/internal/auth"
	"fxdesk/internal/gate"
	"fxdesk/internal/metrics"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
)

type holding struct{}

func (holding) HoldsLease() bool { return true }

type noPrices struct{}

func (noPrices) LastTick(string) (tick.Quote, bool) { return tick.Quote{}, false }
func (noPrices) SymbolState(string) tick.State      { return tick.QuotingHalted }

// A request whose client went away (the client's choice, not a failure of the desk) is neither logged
// as an error nor counted as an internal one: the order route, through the real service, sees its
// request's context cancelled and answers "client gone" at info, counted as result="canceled". A
// cancellation that is not the request's own stays an internal error.
func TestClientGoneIsNotAnInternalError(t *testing.T) {
	db, closeDB, err := dbtest.NewMigrated("api_client_gone")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	logs := &dbtest.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := gate.New(gate.Config{Lease: holding{}, Log: log, Dropped: gate.NewDropped()})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := trading.New(trading.Config{DB: db, Prices: noPrices{}, Gate: g, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	committing, stopCommits := context.WithCancel(context.Background())
	go svc.Run(committing)
	t.Cleanup(stopCommits)
	m := metrics.New("web")
	h := handlePlaceOrder(log, svc, m)

	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), principalKey{}, auth.Principal{UserID: 1}))
	cancel() // the client hung up before the handler reached the database
	req := httptest.NewRequest("POST", "/api/fx/orders", strings.NewReader(`{"accountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if n := strings.Count(logs.String(), "level=ERROR"); n != 0 {
		t.Fatalf("a client that went away was logged as an error:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `level=INFO msg="client gone"`) {
		t.Fatalf("no client gone line at info:\n%s", logs)
	}
	if got := testutil.ToFloat64(m.Orders.WithLabelValues("internal")); got != 0 {
		t.Fatalf("fxdesk_orders_total{result=internal} = %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.Orders.WithLabelValues("canceled")); got != 1 {
		t.Fatalf("fxdesk_orders_total{result=canceled} = %v, want 1", got)
	}
	if rec.Code == http.StatusInternalServerError {
		t.Fatalf("answered %d", rec.Code)
	}

	// Intent: only the request's own context makes a cancellation "client gone".
	logs.Reset()
	internal := handle(log, func(http.ResponseWriter, *http.Request) error {
		return fmt.Errorf("call a dependency: %w", context.Canceled)
	})
	rec = httptest.NewRecorder()
	internal.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), `level=ERROR msg="request failed"`) {
		t.Fatalf("a cancellation of another context: %d\n%s", rec.Code, logs)
	}
}
