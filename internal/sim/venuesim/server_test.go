package venuesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/feedsim"
)

const testToken = "test-token-0123456789"

// env is one running simulator priced by an in-process feed simulator.
type env struct {
	t    *testing.T
	sim  *Server
	feed *feedsim.Server
	http *http.Client
}

// start runs a simulator until the test ends. cfg.Prices defaults to an in-process feed with
// EURUSD at 1.1/1.1002 and USDJPY at 150/150.02.
func start(t *testing.T, cfg Config) *env {
	t.Helper()
	feed := feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, slog.New(slog.DiscardHandler))
	setQuote(t, feed, "EURUSD", 1.1, 1.1002)
	setQuote(t, feed, "USDJPY", 150, 150.02)
	if cfg.Prices == nil {
		cfg.Prices = FeedPrices(feed)
	}
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	sim, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.ListenControl("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	tr := &http.Transport{MaxIdleConnsPerHost: 1000}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("simulator did not stop within 5s")
		}
		tr.CloseIdleConnections()
	})
	return &env{t: t, sim: sim, feed: feed, http: &http.Client{Transport: tr}}
}

func setQuote(t *testing.T, feed *feedsim.Server, symbol string, bid, ask float64) {
	t.Helper()
	if _, err := feed.SetQuote(symbol, bid, ask); err != nil {
		t.Fatal(err)
	}
}

// answer is a decoded JSON body.
type answer map[string]any

// str reads a nested string field: a.str("orderFillTransaction", "price").
func (a answer) str(path ...string) string {
	var v any = map[string]any(a)
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

func (a answer) has(key string) bool { _, ok := a[key]; return ok }

func (e *env) request(method, url string, body any, token string) (int, answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out answer
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("%s %s answered %d %q: %v", method, url, resp.StatusCode, raw, err)
	}
	return resp.StatusCode, out, nil
}

// call is one trading request for the simulator's account; path starts after /v3/accounts/{id}.
func (e *env) call(method, path string, body any) (int, answer) {
	e.t.Helper()
	code, out, err := e.request(method, e.sim.URL()+"/v3/accounts/"+e.sim.AccountID()+path, body, testToken)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

func (e *env) control(method, path string, body any) (int, answer) {
	e.t.Helper()
	code, out, err := e.request(method, e.sim.ControlURL()+path, body, "")
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

func orderBody(clientID, instrument, units string) any {
	ext := map[string]string{"id": clientID, "tag": "fxdesk"}
	return map[string]any{"order": map[string]any{"type": "MARKET", "instrument": instrument, "units": units,
		"timeInForce": "FOK", "positionFill": "DEFAULT", "clientExtensions": ext, "tradeClientExtensions": ext}}
}

func (e *env) order(clientID, instrument, units string) (int, answer) {
	e.t.Helper()
	return e.call(http.MethodPost, "/orders", orderBody(clientID, instrument, units))
}

// fill places an order that must fill and returns its fill transaction.
func (e *env) fill(clientID, instrument, units string) answer {
	e.t.Helper()
	code, out := e.order(clientID, instrument, units)
	fill, ok := out["orderFillTransaction"].(map[string]any)
	if code != http.StatusCreated || !ok {
		e.t.Fatalf("order %s %s %s: %d %v", clientID, instrument, units, code, out)
	}
	return fill
}

// waitFor polls observable state until ok, failing after 5s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, 5*time.Millisecond, what, ok)
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestFillsAtFeedPriceAndBooksPL(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})

	buy := answer(e.fill("B1", "EUR_USD", "100000"))
	if buy.str("price") != "1.1002" || buy.str("tradeOpened", "tradeID") != buy.str("id") || buy.str("clientOrderID") != "B1" {
		t.Fatalf("a buy fills at the ask and opens a trade named by the fill: %v", buy)
	}
	sell := answer(e.fill("S1", "EUR_USD", "-50000"))
	if sell.str("price") != "1.1" || sell.str("tradeOpened", "units") != "-50000" {
		t.Fatalf("a sell fills at the bid: %v", sell)
	}

	// The price moves 8 pips: the long closes at the new bid, the short at the new ask.
	setQuote(t, e.feed, "EURUSD", 1.1010, 1.1012)
	code, closed := e.call(http.MethodPut, "/trades/"+buy.str("id")+"/close", map[string]string{"units": "ALL"})
	fill := answer(closed["orderFillTransaction"].(map[string]any))
	if code != http.StatusOK || fill.str("price") != "1.101" || fill.str("pl") != "80.0000" || fill.str("units") != "-100000" {
		t.Fatalf("close long: %d %v", code, closed)
	}
	code, closed = e.call(http.MethodPut, "/trades/@S1/close", map[string]string{"units": "20000"})
	fill = answer(closed["orderFillTransaction"].(map[string]any))
	if code != http.StatusOK || fill.str("price") != "1.1012" || fill.str("pl") != "-24.0000" || fill.str("tradeReduced", "tradeID") != sell.str("id") {
		t.Fatalf("partial close of the short: %d %v", code, closed)
	}

	_, sum := e.call(http.MethodGet, "/summary", nil)
	acct := answer(sum["account"].(map[string]any))
	// Balance: 1,000,000 + 80 − 24. The 30,000 short left: unrealized 30,000 × (1.1 − 1.1012) = −36;
	// margin 30,000 × 1.1011 ÷ 50 = 660.66.
	if acct.str("balance") != "1000056.0000" || acct.str("NAV") != "1000020.0000" || acct.str("marginUsed") != "660.6600" {
		t.Fatalf("summary: %v", acct)
	}
	if acct["openTradeCount"] != 1.0 || acct.str("marginAvailable") != "999359.3400" {
		t.Fatalf("summary: %v", acct)
	}

	_, tr := e.call(http.MethodGet, "/trades/@S1", nil)
	trade := answer(tr["trade"].(map[string]any))
	if trade.str("currentUnits") != "-30000" || trade.str("averageClosePrice") != "1.1012" || trade.str("state") != "OPEN" ||
		trade.str("clientExtensions", "tag") != "fxdesk" || trade.str("realizedPL") != "-24.0000" {
		t.Fatalf("trade: %v", trade)
	}
}

func TestPLConvertsToAccountCurrency(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	// USDJPY P&L is in yen; the USD account books it at the USDJPY mid.
	buy := answer(e.fill("J1", "USD_JPY", "10000"))
	setQuote(t, e.feed, "USDJPY", 151, 151.02)
	_, closed := e.call(http.MethodPut, "/trades/"+buy.str("id")+"/close", map[string]string{"units": "ALL"})
	pl := dec(answer(closed["orderFillTransaction"].(map[string]any)).str("pl"))
	// 10,000 × (151 − 150.02) = 9,800 yen ÷ 151.01 ≈ 64.90 USD.
	if pl.Sub(dec("64.8964")).Abs().GreaterThan(dec("0.001")) {
		t.Fatalf("pl = %s USD, want about 64.8964", pl)
	}
}

func TestOrdersCancelledForHaltOrMarginAreCreatedNotFilled(t *testing.T) {
	t.Parallel()
	e := start(t, Config{Balance: decimal.NewFromInt(1000)})
	tests := []struct {
		name, clientID, instrument, units, reason string
		setup                                     func()
	}{
		// Each row is a reason a venue accepts an order (201) and does not execute it.
		// An instrument the account offers that the feed does not price (an instrument it does
		// not offer is refused with 400: TestOrderForAnUnknownInstrumentIsRefusedAndCreatesNothing).
		{"unpriced symbol", "C1", "USD_THB", "1000", "MARKET_HALTED", func() {}},
		{"closed session", "C2", "EUR_USD", "1000", "MARKET_HALTED", func() {
			if err := e.feed.SetSession("EURUSD", false); err != nil {
				t.Fatal(err)
			}
		}},
		// 1,000 USD at 50:1 carries 50,000 USD of notional; 100,000 EUR is about 110,000.
		{"margin", "C3", "EUR_USD", "100000", "INSUFFICIENT_MARGIN", func() {
			if err := e.feed.SetSession("EURUSD", true); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		tt.setup()
		code, out := e.order(tt.clientID, tt.instrument, tt.units)
		cancel := answer(func() map[string]any { m, _ := out["orderCancelTransaction"].(map[string]any); return m }())
		if code != http.StatusCreated || out.has("orderFillTransaction") || cancel.str("reason") != tt.reason {
			t.Fatalf("%s: %d %v, want 201 with a cancel %s", tt.name, code, out, tt.reason)
		}
		_, o := e.call(http.MethodGet, "/orders/@"+tt.clientID, nil)
		ord := answer(o["order"].(map[string]any))
		if ord.str("state") != "CANCELLED" || ord.str("cancellingTransactionID") != cancel.str("id") {
			t.Fatalf("%s: order %v", tt.name, ord)
		}
		_, tx := e.call(http.MethodGet, "/transactions/"+cancel.str("id"), nil)
		if answer(tx["transaction"].(map[string]any)).str("reason") != tt.reason {
			t.Fatalf("%s: cancelling transaction %v", tt.name, tx)
		}
	}
	if st := e.sim.State(); st.OrdersExecuted != 0 || st.OrdersCancelled != 3 || len(st.Trades) != 0 {
		t.Fatalf("state after cancels: %+v", st)
	}
	// A small order fits the margin.
	e.fill("C4", "EUR_USD", "1000")
}

func TestClientIDIsUnique(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("U1", "EUR_USD", "1000")
	code, out := e.order("U1", "EUR_USD", "1000")
	if code != http.StatusBadRequest || out.str("errorCode") != "CLIENT_ORDER_ID_ALREADY_EXISTS" {
		t.Fatalf("re-send: %d %v", code, out)
	}
	st := e.sim.State()
	if st.OrderRequests["U1"] != 2 || st.OrdersExecuted != 1 || len(st.Trades) != 1 {
		t.Fatalf("a re-send executed something: %+v", st)
	}
}

func TestConcurrentResendsExecuteOnce(t *testing.T) {
	t.Parallel()
	// Re-sends that arrive while the first copy is still executing are refused too.
	e := start(t, Config{Latency: 50 * time.Millisecond})
	codes := make(chan int, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			code, _ := e.order("R1", "EUR_USD", "1000")
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	created := 0
	for c := range codes {
		if c == http.StatusCreated {
			created++
		}
	}
	if st := e.sim.State(); created != 1 || st.OrdersExecuted != 1 || st.OrderRequests["R1"] != 8 {
		t.Fatalf("8 concurrent copies: %d created, state %+v", created, st)
	}
}

func TestFault5xxExecutesNothing(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	if code, out := e.control(http.MethodPost, "/control/fault", map[string]any{"kind": "5xx", "count": 2}); code != http.StatusOK {
		t.Fatalf("fault: %d %v", code, out)
	}
	if code, _ := e.order("F1", "EUR_USD", "1000"); code != http.StatusServiceUnavailable {
		t.Fatalf("order under a 5xx fault answered %d", code)
	}
	if code, _ := e.call(http.MethodGet, "/summary", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("summary under a 5xx fault answered %d", code)
	}
	if st := e.sim.State(); st.OrdersExecuted != 0 || st.OrderRequests["F1"] != 1 || st.Pending.FiveXX != 0 {
		t.Fatalf("a 5xx executed something: %+v", st)
	}
	// Nothing was executed, so the client id is still free.
	e.fill("F1", "EUR_USD", "1000")
}

func TestFaultTimeoutExecutesThenCuts(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("T0", "EUR_USD", "1000")
	if err := e.sim.InjectFault(Fault{Kind: FaultTimeout, Count: 2, Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	url := e.sim.URL() + "/v3/accounts/" + e.sim.AccountID()
	if _, _, err := e.request(http.MethodPost, url+"/orders", orderBody("T1", "EUR_USD", "1000"), testToken); err == nil {
		t.Fatal("an order under a timeout fault got an answer")
	}
	if _, _, err := e.request(http.MethodPut, url+"/trades/@T0/close", map[string]string{"units": "ALL"}, testToken); err == nil {
		t.Fatal("a close under a timeout fault got an answer")
	}
	st := e.sim.State()
	if st.OrdersExecuted != 2 || st.ClosesExecuted != 1 || st.Trades[0].State != "CLOSED" || st.Trades[1].ClientID != "T1" {
		t.Fatalf("a timeout must execute first: %+v", st)
	}
	e.fill("T2", "EUR_USD", "1000") // the fault is used up
}

// A close the venue refuses executes nothing, so it leaves a pending timeout to the next close
// that executes.
func TestFaultTimeoutSkipsRefusedCloses(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("R0", "EUR_USD", "1000")
	if err := e.sim.InjectFault(Fault{Kind: FaultTimeout, Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if code, out := e.call(http.MethodPut, "/trades/@nobody/close", map[string]string{"units": "ALL"}); code != http.StatusNotFound {
		t.Fatalf("a close of an unknown trade: %d %v", code, out)
	}
	if code, out := e.call(http.MethodPut, "/trades/@R0/close", map[string]string{"units": "5000"}); code != http.StatusBadRequest {
		t.Fatalf("a close of more units than open: %d %v", code, out)
	}
	if st := e.sim.State(); st.Pending.Timeouts != 1 {
		t.Fatalf("refused closes took the timeout: %+v", st.Pending)
	}
	url := e.sim.URL() + "/v3/accounts/" + e.sim.AccountID()
	if _, _, err := e.request(http.MethodPut, url+"/trades/@R0/close", map[string]string{"units": "ALL"}, testToken); err == nil {
		t.Fatal("a close under a timeout fault got an answer")
	}
}

func TestFaultHoldAndRelease(t *testing.T) {
	t.Parallel()
	// 650 held orders keep 650 connections open at once: the venue serves a pool sized for a burst.
	const n = 650
	e := start(t, Config{})
	if err := e.sim.InjectFault(Fault{Kind: FaultHold, Count: n}); err != nil {
		t.Fatal(err)
	}
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, out := e.order(fmt.Sprintf("H%d", i), "EUR_USD", "1000")
			if !out.has("orderFillTransaction") {
				code = -code
			}
			codes <- code
		})
	}
	waitFor(t, "every order held", func() bool { return e.sim.State().Held == n })
	st := e.sim.State()
	if st.OrdersExecuted != n || st.OpenConnections < n || len(codes) != 0 {
		t.Fatalf("held orders must be executed and unanswered: executed %d, %d connections, %d answered",
			st.OrdersExecuted, st.OpenConnections, len(codes))
	}
	if code, out := e.control(http.MethodPost, "/control/release", struct{}{}); code != http.StatusOK || out["released"] != float64(n) {
		t.Fatalf("release: %d %v", code, out)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusCreated {
			t.Fatalf("a released order answered %d", c)
		}
	}
	if st := e.sim.State(); st.Held != 0 || st.Connections < n {
		t.Fatalf("after release: held %d, %d connections accepted", st.Held, st.Connections)
	}
}

func TestFaultCancelCancelsTheNextOrderWithItsReason(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	if code, out := e.control(http.MethodPost, "/control/fault", map[string]any{"kind": "cancel", "reason": "INSUFFICIENT_MARGIN"}); code != http.StatusOK {
		t.Fatalf("fault: %d %v", code, out)
	}
	_, out := e.order("X1", "EUR_USD", "1000")
	if answer(out).str("orderCancelTransaction", "reason") != "INSUFFICIENT_MARGIN" {
		t.Fatalf("order under a cancel fault: %v", out)
	}
	e.fill("X2", "EUR_USD", "1000")
}

func TestFaultOutageRefusesConnectionsThenReturnsOnTheSameAddress(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("O1", "EUR_USD", "1000") // leaves a keep-alive connection the outage must cut
	addr := strings.TrimPrefix(e.sim.URL(), "http://")
	if code, out := e.control(http.MethodPost, "/control/fault", map[string]any{"kind": "outage", "seconds": 0.3}); code != http.StatusOK {
		t.Fatalf("fault: %d %v", code, out)
	}
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial during an outage: %v, want connection refused", err)
	}
	if st := e.sim.State(); st.OutageUntil == nil {
		t.Fatalf("the control API must answer during an outage with the outage in its state: %+v", st)
	}
	// The outage closes the kept-alive connection; its handler counts it gone a moment later.
	waitFor(t, "the outage to cut the open connection", func() bool { return e.sim.State().OpenConnections == 0 })
	if err := e.sim.InjectFault(Fault{Kind: FaultOutage, Duration: time.Second}); err == nil {
		t.Fatal("a second outage during the first was accepted")
	}
	waitFor(t, "the outage to end", func() bool { return e.sim.State().OutageUntil == nil })
	if e.sim.URL() != "http://"+addr {
		t.Fatalf("the venue came back on %s, want %s", e.sim.URL(), addr)
	}
	e.fill("O2", "EUR_USD", "1000")
}

func TestVenueClosesTrade(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	buy := answer(e.fill("V1", "EUR_USD", "10000"))
	code, out := e.control(http.MethodPost, "/control/close-trade", map[string]any{"tradeId": buy.str("id"), "units": "4000"})
	if code != http.StatusOK || out.str("units") != "-4000" || out.str("price") != "1.1" {
		t.Fatalf("venue partial close: %d %v", code, out)
	}
	if code, out := e.control(http.MethodPost, "/control/close-trade", map[string]any{"tradeId": buy.str("id")}); code != http.StatusOK {
		t.Fatalf("venue close: %d %v", code, out)
	}
	if code, _ := e.control(http.MethodPost, "/control/close-trade", map[string]any{"tradeId": buy.str("id")}); code != http.StatusNotFound {
		t.Fatalf("closing a closed trade answered %d, want 404", code)
	}
	_, txs := e.call(http.MethodGet, "/transactions/sinceid?id="+buy.str("id"), nil)
	var reasons []string
	for _, tx := range txs["transactions"].([]any) {
		reasons = append(reasons, answer(tx.(map[string]any)).str("reason"))
	}
	want := []string{"MARGIN_CLOSEOUT", "MARKET_ORDER_MARGIN_CLOSEOUT", "MARGIN_CLOSEOUT", "MARKET_ORDER_MARGIN_CLOSEOUT"}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("transactions after the fill: %v, want %v", reasons, want)
	}
	// The control answer is the partial close's fill: its id, the trade, and the P&L of 4000
	// units bought at the ask (1.1002) and closed at the bid (1.1).
	partial := answer(txs["transactions"].([]any)[1].(map[string]any))
	if fmt.Sprint(out["transactionId"]) != partial.str("id") || out.str("tradeId") != buy.str("id") || out.str("realizedPL") != "-0.8" {
		t.Fatalf("venue partial close answered %v, its fill is %v", out, partial)
	}
	_, tr := e.call(http.MethodGet, "/trades/@V1", nil)
	trade := answer(tr["trade"].(map[string]any))
	if trade.str("state") != "CLOSED" || trade.str("currentUnits") != "0" || len(trade["closingTransactionIDs"].([]any)) != 2 {
		t.Fatalf("trade after venue closes: %v", trade)
	}
	if _, open := e.call(http.MethodGet, "/openTrades", nil); len(open["trades"].([]any)) != 0 {
		t.Fatalf("open trades after the venue closed them: %v", open)
	}
}

func TestUntaggedTradeOpensWithoutClientExtensions(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("G1", "EUR_USD", "1000")
	code, out := e.control(http.MethodPost, "/control/untagged", map[string]any{"symbol": "EURUSD", "units": "-2500"})
	if code != http.StatusOK || out.str("tradeId") == "" {
		t.Fatalf("untagged: %d %v", code, out)
	}
	_, open := e.call(http.MethodGet, "/openTrades", nil)
	trades := open["trades"].([]any)
	newest := answer(trades[0].(map[string]any))
	if len(trades) != 2 || newest.str("id") != out.str("tradeId") || newest.has("clientExtensions") || newest.str("currentUnits") != "-2500" {
		t.Fatalf("open trades: %v", trades)
	}
}

func TestAuthAndAccount(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	base := e.sim.URL() + "/v3/accounts/"
	tests := []struct {
		name, url, token string
		want             int
	}{
		// Each row is a request the venue must refuse before it looks at the body.
		{"no token", base + e.sim.AccountID() + "/summary", "", http.StatusUnauthorized},
		{"wrong token", base + e.sim.AccountID() + "/summary", "nope", http.StatusUnauthorized},
		{"other account", base + "999/summary", testToken, http.StatusForbidden},
	}
	for _, tt := range tests {
		code, out, err := e.request(http.MethodGet, tt.url, nil, tt.token)
		if err != nil || code != tt.want || out.str("errorMessage") == "" {
			t.Fatalf("%s: %d %v %v, want %d with an errorMessage", tt.name, code, out, err, tt.want)
		}
	}
}

func TestControlStateCountsRequestsOrdersAndTrades(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	e.fill("S1", "EUR_USD", "1000")
	e.order("S1", "EUR_USD", "1000")
	e.call(http.MethodGet, "/openTrades", nil)
	code, st := e.control(http.MethodGet, "/control/state", nil)
	if code != http.StatusOK {
		t.Fatalf("state: %d %v", code, st)
	}
	var got State
	raw, _ := json.Marshal(st)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Requests["POST /orders"] != 2 || got.Requests["GET /openTrades"] != 1 || got.OrderRequests["S1"] != 2 ||
		got.OrdersExecuted != 1 || got.LastTransactionID != 3 || got.Connections < 1 || len(got.Trades) != 1 ||
		got.Trades[0].ClientID != "S1" || got.Trades[0].Tag != "fxdesk" || !got.Trades[0].Price.Equal(dec("1.1002")) {
		t.Fatalf("state: %+v", got)
	}
}

func TestTransactionsSinceIDListsOnlyLaterOnes(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	for i := range 3 {
		e.fill(fmt.Sprintf("T%d", i), "EUR_USD", "1000")
	}
	_, out := e.call(http.MethodGet, "/transactions/sinceid?id=2", nil)
	txs := out["transactions"].([]any)
	// 1 is the deposit; each order is a MARKET_ORDER and an ORDER_FILL.
	if out.str("lastTransactionID") != "7" || len(txs) != 5 {
		t.Fatalf("sinceid=2: %v", out)
	}
	for i, tx := range txs {
		if id := answer(tx.(map[string]any)).str("id"); id != fmt.Sprint(i+3) {
			t.Fatalf("transaction %d has id %s", i, id)
		}
	}
	if code, _ := e.call(http.MethodGet, "/transactions/sinceid?id=x", nil); code != http.StatusBadRequest {
		t.Fatalf("a bad id answered %d", code)
	}
}

func TestFeedControlPrices(t *testing.T) {
	t.Parallel()
	feed := feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, slog.New(slog.DiscardHandler))
	if _, err := feed.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	t.Cleanup(func() { cancel(); poll.Receive(t, done, 10*time.Second, "Run returning after its context ended") })
	setQuote(t, feed, "GBPUSD", 1.25, 1.2503)

	prices, err := FeedControlPrices("http://" + feed.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, Config{Prices: prices})
	if fill := answer(e.fill("P1", "GBP_USD", "-1000")); fill.str("price") != "1.25" {
		t.Fatalf("a sell priced by the feed's control state: %v", fill)
	}
	if _, err := FeedControlPrices("127.0.0.1:8090"); err == nil {
		t.Fatal("a URL without a scheme was accepted")
	}
}

func TestControlRefusesMalformedCallsWith400(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	tests := []struct {
		name, path string
		body       any
	}{
		// Each row is a control call a test author could get wrong; all must answer 400.
		{"unknown kind", "/control/fault", map[string]any{"kind": "slow"}},
		{"outage without seconds", "/control/fault", map[string]any{"kind": "outage"}},
		{"timeout without seconds", "/control/fault", map[string]any{"kind": "timeout"}},
		{"cancel without reason", "/control/fault", map[string]any{"kind": "cancel"}},
		{"unknown field", "/control/fault", map[string]any{"kind": "5xx", "times": 2}},
		{"latency without ms", "/control/latency", map[string]any{}},
		{"untagged zero units", "/control/untagged", map[string]any{"symbol": "EURUSD", "units": "0"}},
		{"untagged bad symbol", "/control/untagged", map[string]any{"symbol": "EUR/USD", "units": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out := e.control(http.MethodPost, tt.path, tt.body)
			if code != http.StatusBadRequest || out["error"] == nil {
				t.Fatalf("%s answered %d %v, want 400 with an error", tt.path, code, out)
			}
		})
	}
}

func TestControlLoopbackOnly(t *testing.T) {
	t.Parallel()
	s, err := New(Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/control/state", nil)
	req.RemoteAddr = "203.0.113.7:40000"
	rec := httptest.NewRecorder()
	s.controlRoutes().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("remote caller got %d, want 403", rec.Code)
	}
}

func TestLatencyDelaysAnswersUntilSetToZero(t *testing.T) {
	t.Parallel()
	e := start(t, Config{Latency: 150 * time.Millisecond})
	began := time.Now()
	e.fill("L1", "EUR_USD", "1000")
	if took := time.Since(began); took < 150*time.Millisecond {
		t.Fatalf("an order with 150ms latency answered in %v", took)
	}
	if code, _ := e.control(http.MethodPost, "/control/latency", map[string]any{"ms": 0}); code != http.StatusOK {
		t.Fatal("latency refused")
	}
	if st := e.sim.State(); st.LatencyMS != 0 {
		t.Fatalf("latency after setting 0: %v ms", st.LatencyMS)
	}
}

// Zero and NoLatency both mean none: NoLatency stays for callers written when zero meant
// DefaultLatency.
func TestNoLatencyByDefault(t *testing.T) {
	t.Parallel()
	for _, latency := range []time.Duration{0, NoLatency} {
		sim, err := New(Config{Latency: latency}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if st := sim.State(); st.LatencyMS != 0 {
			t.Fatalf("Config.Latency %v: latency %v ms, want none", latency, st.LatencyMS)
		}
	}
}

func TestStopEndsHeldAnswers(t *testing.T) {
	t.Parallel()
	feed := feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, slog.New(slog.DiscardHandler))
	setQuote(t, feed, "EURUSD", 1.1, 1.1002)
	sim, err := New(Config{Prices: FeedPrices(feed)}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	if err := sim.InjectFault(Fault{Kind: FaultHold}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, sim: sim, http: &http.Client{Transport: &http.Transport{}}}
	sent := make(chan error, 1)
	go func() {
		_, _, err := e.request(http.MethodPost, sim.URL()+"/v3/accounts/"+sim.AccountID()+"/orders", orderBody("Z1", "EUR_USD", "1"), "any")
		sent <- err
	}()
	waitFor(t, "the order held", func() bool { return sim.State().Held == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a held answer kept the simulator from stopping")
	}
	if err := <-sent; err == nil {
		t.Fatal("a held order was answered by a stopping simulator")
	}
}

func TestStopCutsUnusedConnections(t *testing.T) {
	t.Parallel()
	// A client that pre-opens its pool holds connections that never sent a request; the stop
	// must still be clean and prompt.
	sim, err := New(Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	conn, err := net.Dial("tcp", strings.TrimPrefix(sim.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "the connection accepted", func() bool { return sim.Connections() == 1 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(4 * time.Second):
		t.Fatal("an unused connection kept the simulator from stopping")
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the unused connection after the stop: %v, want EOF", err)
	}
}
