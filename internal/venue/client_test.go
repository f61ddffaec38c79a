package venue_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/venue"
)

const token = "secret-token-abcdefghijklmnop-WXYZ"

// startVenue runs a venue simulator priced by an in-process feed (EURUSD 1.1/1.1002) until the
// test ends.
func startVenue(t *testing.T) *venuesim.Server {
	t.Helper()
	feed := feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, slog.New(slog.DiscardHandler))
	if _, err := feed.SetQuote("EURUSD", 1.1, 1.1002); err != nil {
		t.Fatal(err)
	}
	sim, err := venuesim.New(venuesim.Config{Token: token, Latency: venuesim.NoLatency, Prices: venuesim.FeedPrices(feed)},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err, ok := poll.Receive(t, done, 10*time.Second, "the venue simulator returning after its context ended"); ok && err != nil {
			t.Errorf("venue simulator: %v", err)
		}
	})
	return sim
}

// newClient is a client of sim with its own connection pool; edit adjusts the config.
func newClient(t *testing.T, baseURL, account string, edit func(*venue.ClientConfig)) *venue.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := venue.ClientConfig{BaseURL: baseURL, AccountID: account, Token: token, HTTP: &http.Client{Transport: tr}, Timeout: 5 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	c, err := venue.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func simClient(t *testing.T, sim *venuesim.Server) *venue.Client {
	t.Helper()
	return newClient(t, sim.URL(), sim.AccountID(), nil)
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func market(clientID, units string) venue.MarketOrder {
	return venue.MarketOrder{ClientID: clientID, Symbol: "EURUSD", Units: dec(units)}
}

func TestClientRoundTrip(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	ctx := context.Background()

	out, err := c.PlaceMarket(ctx, market("D1", "100000"))
	if err != nil || out.Fill == nil || out.Cancelled != nil {
		t.Fatalf("PlaceMarket: %+v, %v", out, err)
	}
	f := out.Fill
	if f.Symbol != "EURUSD" || !f.Units.Equal(dec("100000")) || !f.Price.Equal(dec("1.1002")) || f.TradeOpened == "" ||
		f.OrderID == "" || f.Time.IsZero() || out.LastTransactionID != f.TransactionID {
		t.Fatalf("fill: %+v (last %d)", f, out.LastTransactionID)
	}

	byID, ok, err := c.TradeByID(ctx, f.TradeOpened)
	if err != nil || !ok || byID.ClientID != "D1" || byID.Tag != venue.Tag || byID.Symbol != "EURUSD" ||
		byID.State != venue.TradeOpen || !byID.Price.Equal(f.Price) || !byID.CurrentUnits.Equal(dec("100000")) {
		t.Fatalf("TradeByID: %+v %v %v", byID, ok, err)
	}
	byClient, ok, err := c.TradeByClientID(ctx, "D1")
	if err != nil || !ok || byClient.ID != f.TradeOpened {
		t.Fatalf("TradeByClientID: %+v %v %v", byClient, ok, err)
	}
	order, ok, err := c.OrderByClientID(ctx, "D1")
	if err != nil || !ok || order.State != venue.OrderFilled || order.FillingTransactionID != f.TransactionID ||
		order.TradeOpenedID != f.TradeOpened || order.ID != f.OrderID || order.Tag != venue.Tag || order.CreateTime.IsZero() {
		t.Fatalf("OrderByClientID: %+v %v %v", order, ok, err)
	}
	if open, err := c.OpenTrades(ctx); err != nil || len(open) != 1 || open[0].ID != f.TradeOpened {
		t.Fatalf("OpenTrades: %+v %v", open, err)
	}

	part := dec("40000")
	reduced, err := c.CloseTrade(ctx, f.TradeOpened, &part)
	if err != nil || reduced.Fill == nil || reduced.Fill.TradeReduced != f.TradeOpened || len(reduced.Fill.TradesClosed) != 0 ||
		!reduced.Fill.Units.Equal(dec("-40000")) || !reduced.Fill.Price.Equal(dec("1.1")) || !reduced.Fill.RealizedPL.Equal(dec("-8")) {
		t.Fatalf("partial CloseTrade: %+v %v", reduced.Fill, err)
	}
	closed, err := c.CloseTrade(ctx, f.TradeOpened, nil)
	if err != nil || closed.Fill == nil || len(closed.Fill.TradesClosed) != 1 || closed.Fill.TradesClosed[0] != f.TradeOpened {
		t.Fatalf("CloseTrade all: %+v %v", closed.Fill, err)
	}
	after, _, err := c.TradeByID(ctx, f.TradeOpened)
	if err != nil || after.State != venue.TradeClosed || !after.CurrentUnits.IsZero() || after.CloseTime == nil ||
		after.AverageClosePrice == nil || !after.AverageClosePrice.Equal(dec("1.1")) || !after.RealizedPL.Equal(dec("-20")) ||
		fmt.Sprint(after.ClosingTransactionIDs) != fmt.Sprint([]int64{reduced.Fill.TransactionID, closed.Fill.TransactionID}) {
		t.Fatalf("closed trade: %+v %v", after, err)
	}

	sum, err := c.Summary(ctx)
	if err != nil || sum.Currency != "USD" || !sum.Balance.Equal(dec("999980")) || !sum.NAV.Equal(sum.Balance) ||
		sum.OpenTradeCount != 0 || !sum.MarginUsed.IsZero() || sum.LastTransactionID != closed.LastTransactionID {
		t.Fatalf("Summary: %+v %v", sum, err)
	}

	txs, last, err := c.TransactionsSince(ctx, 0)
	if err != nil || last != sum.LastTransactionID || int64(len(txs)) != last {
		t.Fatalf("TransactionsSince: %d transactions, last %d, %v", len(txs), last, err)
	}
	for i, tx := range txs {
		if tx.ID != int64(i+1) || tx.Time.IsZero() {
			t.Fatalf("transaction %d: %+v", i, tx)
		}
	}
	if fill := txs[f.TransactionID-1]; fill.Type != "ORDER_FILL" || fill.ClientID != "D1" || fill.TradeOpened != f.TradeOpened || fill.Symbol != "EURUSD" {
		t.Fatalf("the fill as a transaction: %+v", fill)
	}
	if closing := txs[closed.Fill.TransactionID-1]; len(closing.Changes) != 1 || closing.Changes[0].TradeID != f.TradeOpened ||
		!closing.Changes[0].Units.Equal(closed.Fill.Units) || closing.Reason != "MARKET_ORDER_TRADE_CLOSE" {
		t.Fatalf("the close as a transaction: %+v", closing)
	}
	if rest, last2, err := c.TransactionsSince(ctx, last); err != nil || len(rest) != 0 || last2 != last {
		t.Fatalf("TransactionsSince(last): %v %d %v", rest, last2, err)
	}
}

func TestClientReadsACreatedButCancelledOrder(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultCancel, Reason: venue.ReasonInsufficientMargin}); err != nil {
		t.Fatal(err)
	}
	out, err := c.PlaceMarket(context.Background(), market("K1", "1000"))
	if err != nil || out.Fill != nil || out.Cancelled == nil || out.Cancelled.Reason != venue.ReasonInsufficientMargin || out.Cancelled.Time.IsZero() {
		t.Fatalf("a 201 that is a cancel: %+v %v", out, err)
	}
	order, ok, err := c.OrderByClientID(context.Background(), "K1")
	if err != nil || !ok || order.State != venue.OrderCancelled || order.CancelReason != venue.ReasonInsufficientMargin || order.FillingTransactionID != 0 {
		t.Fatalf("OrderByClientID of a cancelled order: %+v %v %v", order, ok, err)
	}
}

func TestClientNotFound(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	ctx := context.Background()
	if _, ok, err := c.TradeByID(ctx, "999"); ok || err != nil {
		t.Fatalf("TradeByID of an unknown trade: %v %v", ok, err)
	}
	if _, ok, err := c.TradeByClientID(ctx, "nobody"); ok || err != nil {
		t.Fatalf("TradeByClientID of an unknown client id: %v %v", ok, err)
	}
	if _, ok, err := c.OrderByClientID(ctx, "nobody"); ok || err != nil {
		t.Fatalf("OrderByClientID of an unknown client id: %v %v", ok, err)
	}
	var ve *venue.Error
	if _, err := c.CloseTrade(ctx, "999", nil); !errors.As(err, &ve) || ve.Code != "TRADE_DOESNT_EXIST" || ve.Status != http.StatusNotFound {
		t.Fatalf("CloseTrade of an unknown trade: %v", err)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// rawVenue answers every request with status and body, for answers the simulator never gives.
func rawVenue(t *testing.T, status int, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte(body))
	}), ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

func TestClientErrorClasses(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	ctx := context.Background()
	tests := []struct {
		name string
		// call runs one request and returns its error; executed is how many orders the
		// venue must have executed because of it (-1: not checked).
		call     func(t *testing.T) error
		want     error // ErrNotSent, ErrOutcomeUnknown or nil for *Error
		status   int   // the *Error's status when want is nil
		executed int
	}{
		{"connection refused", func(t *testing.T) error {
			_, err := newClient(t, "http://"+closedAddr(t), "a", nil).PlaceMarket(ctx, market("E1", "1"))
			return err
		}, venue.ErrNotSent, 0, -1},
		{"venue outage", func(t *testing.T) error {
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultOutage, Duration: 200 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			_, err := simClient(t, sim).PlaceMarket(ctx, market("E2", "1"))
			waitFor(t, "the outage to end", func() bool { return sim.State().OutageUntil == nil })
			return err
		}, venue.ErrNotSent, 0, 0},
		{"context ended before the send", func(t *testing.T) error {
			done, cancel := context.WithCancel(ctx)
			cancel()
			_, err := simClient(t, sim).PlaceMarket(done, market("E3", "1"))
			return err
		}, venue.ErrNotSent, 0, 0},
		{"client timeout after execution", func(t *testing.T) error {
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: time.Minute}); err != nil {
				t.Fatal(err)
			}
			c := newClient(t, sim.URL(), sim.AccountID(), func(cfg *venue.ClientConfig) { cfg.Timeout = 200 * time.Millisecond })
			_, err := c.PlaceMarket(ctx, market("E4", "1"))
			return err
		}, venue.ErrOutcomeUnknown, 0, 1},
		{"connection cut after execution", func(t *testing.T) error {
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			_, err := simClient(t, sim).PlaceMarket(ctx, market("E5", "1"))
			return err
		}, venue.ErrOutcomeUnknown, 0, 1},
		{"close cut after execution", func(t *testing.T) error {
			c := simClient(t, sim)
			out, err := c.PlaceMarket(ctx, market("E6", "1"))
			if err != nil {
				t.Fatal(err)
			}
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Duration: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			_, err = c.CloseTrade(ctx, out.Fill.TradeOpened, nil)
			return err
		}, venue.ErrOutcomeUnknown, 0, 1},
		{"5xx", func(t *testing.T) error {
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.Fault5xx}); err != nil {
				t.Fatal(err)
			}
			_, err := simClient(t, sim).PlaceMarket(ctx, market("E7", "1"))
			return err
		}, venue.ErrOutcomeUnknown, 0, 0},
		{"5xx on a read", func(t *testing.T) error {
			if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.Fault5xx}); err != nil {
				t.Fatal(err)
			}
			_, err := simClient(t, sim).Summary(ctx)
			return err
		}, venue.ErrOutcomeUnknown, 0, 0},
		{"duplicate client id", func(t *testing.T) error {
			c := simClient(t, sim)
			if _, err := c.PlaceMarket(ctx, market("E8", "1")); err != nil {
				t.Fatal(err)
			}
			_, err := c.PlaceMarket(ctx, market("E8", "1"))
			return err
		}, nil, http.StatusBadRequest, 1},
		{"wrong token", func(t *testing.T) error {
			c := newClient(t, sim.URL(), sim.AccountID(), func(cfg *venue.ClientConfig) { cfg.Token = "wrong" })
			_, err := c.PlaceMarket(ctx, market("E9", "1"))
			return err
		}, nil, http.StatusUnauthorized, 0},
		{"unreadable 201", func(t *testing.T) error {
			_, err := newClient(t, rawVenue(t, http.StatusCreated, `{"orderFillTransaction":`), "a", nil).PlaceMarket(ctx, market("E10", "1"))
			return err
		}, venue.ErrOutcomeUnknown, 0, -1},
		{"201 with neither a fill nor a cancel", func(t *testing.T) error {
			_, err := newClient(t, rawVenue(t, http.StatusCreated, `{"lastTransactionID":"3"}`), "a", nil).PlaceMarket(ctx, market("E11", "1"))
			return err
		}, venue.ErrOutcomeUnknown, 0, -1},
		{"4xx that is not JSON", func(t *testing.T) error {
			_, err := newClient(t, rawVenue(t, http.StatusBadRequest, "bad gateway config"), "a", nil).Summary(ctx)
			return err
		}, nil, http.StatusBadRequest, -1},
	}
	// The rows share one venue, so they run in order; each checks the executions it caused.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := sim.State().OrdersExecuted
			err := tt.call(t)
			var ve *venue.Error
			switch {
			case err == nil:
				t.Fatal("no error")
			case tt.want == nil && (!errors.As(err, &ve) || ve.Status != tt.status || ve.Message == ""):
				t.Fatalf("error %v, want *venue.Error %d with a message", err, tt.status)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("error %v, want %v", err, tt.want)
			case errors.Is(err, venue.ErrNotSent) && errors.Is(err, venue.ErrOutcomeUnknown):
				t.Fatalf("error %v is of two classes", err)
			}
			if got := sim.State().OrdersExecuted - before; tt.executed >= 0 && got != tt.executed {
				t.Fatalf("the venue executed %d orders, want %d", got, tt.executed)
			}
		})
	}
}

func TestClientNeverResends(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	// An order on a warm keep-alive connection that the venue cuts after executing it, and one
	// answered 5xx: the transport retries some failed requests by itself, never these.
	if _, err := c.Summary(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultTimeout, Count: 1, Duration: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PlaceMarket(context.Background(), market("N1", "1")); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("PlaceMarket: %v", err)
	}
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.Fault5xx}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PlaceMarket(context.Background(), market("N2", "1")); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("PlaceMarket: %v", err)
	}
	if st := sim.State(); st.OrderRequests["N1"] != 1 || st.OrderRequests["N2"] != 1 || st.Requests["POST /orders"] != 2 {
		t.Fatalf("the client sent again: %v %v", st.OrderRequests, st.Requests)
	}
}

func TestWithWroteFiresWhenTheRequestIsWrittenNotAnswered(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	// A held answer proves the hook reports the request written, not the answer read.
	if err := sim.InjectFault(venuesim.Fault{Kind: venuesim.FaultHold}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	wrote := make(chan time.Time, 2)
	var gotConn atomic.Bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	ctx = venue.WithWrote(ctx, func(at time.Time) {
		calls.Add(1)
		select { // a retried write must not block PlaceMarket: calls counts every one
		case wrote <- at:
		default:
		}
	})
	began := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := c.PlaceMarket(ctx, market("W1", "1"))
		done <- err
	}()
	var at time.Time
	select {
	case at = <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the hook was not called while the answer was held")
	}
	if at.Before(began) || at.After(time.Now()) {
		t.Fatalf("written at %v, outside the call", at)
	}
	waitFor(t, "the answer held", func() bool { return sim.State().Held == 1 })
	sim.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || !gotConn.Load() {
		t.Fatalf("hook called %d times; the caller's own trace ran: %v", calls.Load(), gotConn.Load())
	}
	// The same ctx reused for another call reports that call too.
	if _, err := c.Summary(ctx); err != nil || calls.Load() != 2 {
		t.Fatalf("second call: %v, hook called %d times", err, calls.Load())
	}
}

func TestClientMasksToken(t *testing.T) {
	t.Parallel()
	c := newClient(t, "http://127.0.0.1:1", "acct", nil)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("venue", slog.Any("client", c))
	for name, s := range map[string]string{"String": c.String(), "%v": fmt.Sprintf("%v", c), "log": logged.String()} {
		if strings.Contains(s, token) || strings.Contains(s, token[:8]) || !strings.Contains(s, "****WXYZ") {
			t.Fatalf("%s shows %q", name, s)
		}
	}
	short := newClient(t, "http://127.0.0.1:1", "acct", func(cfg *venue.ClientConfig) { cfg.Token = "tiny" })
	if strings.Contains(short.String(), "tiny") {
		t.Fatalf("a short token is shown: %s", short)
	}
}

func TestNewClientValidates(t *testing.T) {
	t.Parallel()
	ok := venue.ClientConfig{BaseURL: "https://api-fxpractice.oanda.com", AccountID: "101-001-1-001", Token: "t"}
	tests := []struct {
		name string
		edit func(*venue.ClientConfig)
		want string // part of the error a person reads
	}{
		// Each row is a configuration mistake; the error must name what to fix.
		{"no base URL", func(c *venue.ClientConfig) { c.BaseURL = "" }, "BaseURL is required"},
		{"no scheme", func(c *venue.ClientConfig) { c.BaseURL = "api.oanda.com" }, "http:// or https://"},
		{"no host", func(c *venue.ClientConfig) { c.BaseURL = "http://" }, "no host"},
		{"query", func(c *venue.ClientConfig) { c.BaseURL = "http://h/?x=1" }, "query"},
		{"no account", func(c *venue.ClientConfig) { c.AccountID = "" }, "AccountID is required"},
		{"no token", func(c *venue.ClientConfig) { c.Token = "" }, "Token is required"},
		{"token with a line break", func(c *venue.ClientConfig) { c.Token = "a\nb" }, "line breaks"},
		{"negative timeout", func(c *venue.ClientConfig) { c.Timeout = -time.Second }, "Timeout"},
	}
	for _, tt := range tests {
		cfg := ok
		tt.edit(&cfg)
		if _, err := venue.NewClient(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error about %q", tt.name, err, tt.want)
		}
	}
	if _, err := venue.NewClient(ok); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	// The caller's client is used, not changed.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	cfg := ok
	cfg.HTTP = hc
	if _, err := venue.NewClient(cfg); err != nil || hc.CheckRedirect != nil {
		t.Fatalf("NewClient changed the caller's http.Client: %v", err)
	}
}

func TestPlaceMarketRefusesBadOrdersLocally(t *testing.T) {
	t.Parallel()
	sim := startVenue(t)
	c := simClient(t, sim)
	for _, o := range []venue.MarketOrder{
		{Symbol: "EURUSD", Units: dec("1")},
		{ClientID: "L1", Symbol: "EUR_USD", Units: dec("1")},
		{ClientID: "L2", Symbol: "EURUSD"},
	} {
		if _, err := c.PlaceMarket(context.Background(), o); !errors.Is(err, venue.ErrNotSent) {
			t.Fatalf("%+v: %v, want ErrNotSent", o, err)
		}
	}
	if n := sim.State().Requests["POST /orders"]; n != 0 {
		t.Fatalf("%d invalid orders reached the venue", n)
	}
}

// waitFor polls observable state until ok, failing after 5s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, 5*time.Millisecond, what, ok)
}
