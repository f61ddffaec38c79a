package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// feedSim is the real fxdesk-feedsim binary (startFeedSim's args added to its flags) with its
// random walk slowed to never, so the only prices the desk sees are the ones a test sets through
// the control API.
type feedSim struct {
	t    *testing.T
	url  string // ws://ADDR/forex
	base string // http://ADDR
	// kill ends the process and waits for it: the provider is gone.
	kill func()
}

func startFeedSim(t *testing.T, args ...string) *feedSim {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "fxdesk-feedsim"), append([]string{"-addr", "127.0.0.1:0", "-always-open", "-walk", "10000h"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := sync.OnceFunc(func() { cmd.Process.Kill(); cmd.Wait() })
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("feedsim printed no URL: %v", err)
	}
	url := strings.TrimSpace(line)
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/forex")
	return &feedSim{t: t, url: url, base: "http://" + addr, kill: kill}
}

// tradingDesk is one holder web process fed by a test-driven simulator, with an admin token.
type tradingDesk struct {
	e     *deskEnv
	sim   *feedSim
	web   *proc
	admin string
}

// newTradingDesk starts a feed simulator and one fxdesk-web holding the lease on a fresh
// install; env entries override the web process's environment.
func newTradingDesk(t *testing.T, env ...string) *tradingDesk {
	t.Helper()
	e := newDeskEnv(t)
	sim := startFeedSim(t)
	env = append([]string{"FXDESK_FEED=" + sim.url, "FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s"}, env...)
	web := e.start("web", "fxdesk-web", env...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	// A holder refuses fills until its risk view is loaded.
	web.waitLog(10*time.Second, msgIs(msgRiskWatching))
	d := &tradingDesk{e: e, sim: sim, web: web, admin: e.adminToken()}
	return d
}

// call sends a JSON request with token and returns the status and body.
func call(t *testing.T, p *proc, token, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+p.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// must is call that fails the test unless the status is want, decoding the body into v.
func must(t *testing.T, p *proc, token, method, path, body string, want int, v any) {
	t.Helper()
	code, b := call(t, p, token, method, path, body)
	if code != want {
		t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

type errorResp struct {
	Error struct{ Code, Message string } `json:"error"`
}

type accountResp struct {
	Account struct {
		ID          int64   `json:"id"`
		Currency    string  `json:"currency"`
		Balance     string  `json:"balance"`
		Equity      string  `json:"equity"`
		UsedMargin  string  `json:"usedMargin"`
		FreeMargin  string  `json:"freeMargin"`
		MarginLevel *string `json:"marginLevel"`
		Live        *bool   `json:"live"`
	} `json:"account"`
}

type positionJSON struct {
	ID             int64   `json:"id"`
	Symbol         string  `json:"symbol"`
	Side           string  `json:"side"`
	Volume         string  `json:"volume"`
	OpenPrice      string  `json:"openPrice"`
	SL             *string `json:"sl"`
	TP             *string `json:"tp"`
	Commission     string  `json:"commission"`
	RealizedProfit string  `json:"realizedProfit"`
	Status         string  `json:"status"`
}

type dealJSON struct {
	Type         string `json:"type"`
	Amount       string `json:"amount"`
	BalanceAfter string `json:"balanceAfter"`
}

type orderResp struct {
	Order struct {
		ID         int64   `json:"id"`
		Status     string  `json:"status"`
		FillPrice  *string `json:"fillPrice"`
		PositionID *int64  `json:"positionId"`
	} `json:"order"`
	Position   *positionJSON `json:"position"`
	Commission *dealJSON     `json:"commission"`
	Replayed   bool          `json:"replayed"`
}

type closeResp struct {
	Position positionJSON `json:"position"`
	Deal     dealJSON     `json:"deal"`
}

// setQuote sets symbol's price at the simulator and returns once the desk has accepted exactly
// that quote: it listens on the desk's own markets rail, so the signal is the desk's. A desk that
// has just become the holder may not have subscribed at the simulator yet, and the simulator
// sends a quote only to the subscribers it has: the quote is sent again every 250 ms until the
// desk shows it.
func (d *tradingDesk) setQuote(token, symbol, bid, ask string) {
	t := d.e.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.web.addr+"/api/fx/markets/stream?symbols="+symbol, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("markets rail = %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() { // ": fxdesk markets rail" — the subscription is registered
		t.Fatal("markets rail closed before its greeting")
	}
	d.simQuote(symbol, bid, ask)
	// The re-sends end before setQuote returns, so none can reach the simulator after a quote the
	// caller sets next.
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-stopped }()
	go func() {
		defer close(stopped)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		body := quoteBody(symbol, bid, ask)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				d.sim.control("quote", body) // a failure shows as the desk never showing the quote
			}
		}
	}()
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		var ev struct{ Symbol, Bid, Ask string }
		json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
		if ev.Symbol == symbol && ev.Bid == bid && ev.Ask == ask {
			return
		}
	}
	t.Fatalf("the desk never showed %s %s/%s", symbol, bid, ask)
}

// newTrader issues a trader token for user and opens a funded account.
func (d *tradingDesk) newTrader(user int64, currency, leverage, deposit string) (string, int64) {
	t := d.e.t
	t.Helper()
	tok := d.e.issueToken(user, false)
	var a accountResp
	must(t, d.web, tok, "POST", "/api/fx/accounts", fmt.Sprintf(`{"currency":%q,"leverage":%s}`, currency, leverage), http.StatusCreated, &a)
	if deposit != "" {
		d.fund(a.Account.ID, deposit)
	}
	return tok, a.Account.ID
}

// fund deposits amount into account as the install's admin. A deposit above the four-eyes
// threshold (fxFourEyesAbove, 10000 by default) waits as a money request, which the install's
// approver — another user — approves: the account is funded when fund returns.
func (d *tradingDesk) fund(account int64, amount string) {
	t := d.e.t
	t.Helper()
	code, b := call(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", account), fmt.Sprintf(`{"amount":%q}`, amount))
	var pending struct {
		MoneyRequest *struct{ ID int64 } `json:"moneyRequest"`
	}
	switch {
	case code == http.StatusCreated:
	case code == http.StatusAccepted && json.Unmarshal(b, &pending) == nil && pending.MoneyRequest != nil:
		must(t, d.web, d.e.approverToken(), "POST", fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", pending.MoneyRequest.ID), "", http.StatusOK, nil)
	default:
		t.Fatalf("deposit of %s into account %d = %d %s", amount, account, code, b)
	}
}

// checkLedger asserts Σ deals = balance = the last deal's balanceAfter, and that balance is want.
func (d *tradingDesk) checkLedger(account int64, want string) {
	t := d.e.t
	t.Helper()
	var sum, bal, last decimal.Decimal
	if err := d.e.sql.QueryRow("SELECT COALESCE(SUM(`amount`),0) FROM `fx_deal` WHERE `accountId` = ?", account).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT `balance` FROM `fx_account` WHERE `id` = ?", account).Scan(&bal); err != nil {
		t.Fatal(err)
	}
	if err := d.e.sql.QueryRow("SELECT `balanceAfter` FROM `fx_deal` WHERE `accountId` = ? ORDER BY `id` DESC LIMIT 1", account).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if !sum.Equal(bal) || !last.Equal(bal) {
		t.Fatalf("ledger of account %d: Σ deals %s, balance %s, last balanceAfter %s", account, sum, bal, last)
	}
	if w := decimal.RequireFromString(want); !bal.Equal(w) {
		t.Fatalf("balance of account %d = %s, want %s", account, bal, want)
	}
}

func (d *tradingDesk) account(token string, id int64) accountResp {
	var a accountResp
	must(d.e.t, d.web, token, "GET", fmt.Sprintf("/api/fx/accounts/%d", id), "", http.StatusOK, &a)
	return a
}

// listAgrees fails unless the trader's account list and the admin account list show account id
// as the single read on p shows it — the same figures, live or stored, byte for byte — and
// returns the single read.
func (d *tradingDesk) listAgrees(p *proc, token string, id int64) accountResp {
	t := d.e.t
	t.Helper()
	var single struct{ Account json.RawMessage }
	must(t, p, token, "GET", fmt.Sprintf("/api/fx/accounts/%d", id), "", http.StatusOK, &single)
	var list struct{ Accounts []json.RawMessage }
	must(t, p, token, "GET", "/api/fx/accounts", "", http.StatusOK, &list)
	var admin struct {
		Accounts []map[string]json.RawMessage
	}
	must(t, p, d.admin, "GET", "/api/admin/fx/accounts", "", http.StatusOK, &admin)
	var one map[string]json.RawMessage
	if err := json.Unmarshal(single.Account, &one); err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, raw := range list.Accounts {
		var a struct{ ID int64 }
		json.Unmarshal(raw, &a)
		if a.ID == id {
			listed = true
			if !bytes.Equal(raw, single.Account) {
				t.Fatalf("account %d: the list shows %s, the single read %s", id, raw, single.Account)
			}
		}
	}
	for _, a := range admin.Accounts {
		if string(a["id"]) != strconv.FormatInt(id, 10) {
			continue
		}
		for k, v := range one {
			if !bytes.Equal(a[k], v) {
				t.Fatalf("account %d: the admin list shows %s %s, the single read %s", id, k, a[k], v)
			}
		}
	}
	if !listed {
		t.Fatalf("account %d is not in its owner's list", id)
	}
	var out accountResp
	if err := json.Unmarshal([]byte(`{"account":`+string(single.Account)+`}`), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func wantMetrics(t *testing.T, a accountResp, balance, equity, used, free, level string) {
	t.Helper()
	got := a.Account
	lvl := "null"
	if got.MarginLevel != nil {
		lvl = *got.MarginLevel
	}
	if got.Balance != balance || got.Equity != equity || got.UsedMargin != used || got.FreeMargin != free || lvl != level || got.Live == nil || !*got.Live {
		t.Fatalf("metrics = balance %s equity %s used %s free %s level %s live %v; want %s %s %s %s %s live",
			got.Balance, got.Equity, got.UsedMargin, got.FreeMargin, lvl, got.Live, balance, equity, used, free, level)
	}
}

// A USD account on EURUSD: open with SL/TP and commission, modify, partially close, close,
// withdraw — exact figures and Σ deals = balance after every step.
func TestTradingUSDAccountOnEURUSD(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(100, "USD", "100", "10000.00")
	d.checkLedger(acct, "10000.00")
	// Never marked yet: without a position its equity is its balance, in the lists as in the
	// single read (the list once showed 0.00, the stored column's default).
	wantMetrics(t, d.listAgrees(d.web, tok, acct), "10000.00", "10000.00", "0.00", "10000.00", "null")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1.00","sl":"1.09000","tp":"1.12000","requestNonce":"usd-1"}`, acct), http.StatusCreated, &o)
	if o.Order.Status != "FILLED" || *o.Order.FillPrice != "1.1002" || o.Position == nil || o.Position.Commission != "7.00" || o.Commission.Amount != "-7.00" {
		t.Fatalf("fill = %+v position %+v commission %+v", o.Order, o.Position, o.Commission)
	}
	d.checkLedger(acct, "9993.00")
	// Floating (1.10000 − 1.10020) × 100,000 = −20.00; margin 100,000 × mid 1.1001 ÷ 100 = 1100.10.
	wantMetrics(t, d.listAgrees(d.web, tok, acct), "9993.00", "9973.00", "1100.10", "8872.90", "906.55")

	// The same request again (its requestNonce binds it) returns the original order and opens nothing.
	var again orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1.00","sl":"1.09000","tp":"1.12000","requestNonce":"usd-1"}`, acct), http.StatusOK, &again)
	if !again.Replayed || again.Order.ID != o.Order.ID || again.Position.ID != o.Position.ID {
		t.Fatalf("replay = %+v", again)
	}
	d.checkLedger(acct, "9993.00")

	pos := fmt.Sprintf("/api/fx/positions/%d", o.Position.ID)
	var mod struct{ Position positionJSON }
	must(t, d.web, tok, "PATCH", pos, `{"sl":"1.09500","tp":""}`, http.StatusOK, &mod)
	if mod.Position.SL == nil || *mod.Position.SL != "1.095" || mod.Position.TP != nil {
		t.Fatalf("modified = %+v", mod.Position)
	}
	var e errorResp
	must(t, d.web, tok, "PATCH", pos, `{"sl":"1.10500"}`, http.StatusBadRequest, &e)

	d.setQuote(tok, "EURUSD", "1.10500", "1.10520")
	var c closeResp
	must(t, d.web, tok, "POST", pos+"/close", `{"volume":"0.40"}`, http.StatusOK, &c)
	// (1.10500 − 1.10020) × 0.4 × 100,000 = 192.00
	if c.Deal.Amount != "192.00" || c.Position.Volume != "0.6" || c.Position.Status != "OPEN" {
		t.Fatalf("partial close = %+v", c)
	}
	d.checkLedger(acct, "10185.00")

	d.setQuote(tok, "EURUSD", "1.09800", "1.09820")
	must(t, d.web, tok, "POST", pos+"/close", "", http.StatusOK, &c)
	// (1.09800 − 1.10020) × 0.6 × 100,000 = −132.00
	if c.Deal.Amount != "-132.00" || c.Position.Status != "CLOSED" || c.Position.RealizedProfit != "60.00" {
		t.Fatalf("close = %+v", c)
	}
	d.checkLedger(acct, "10053.00")
	wantMetrics(t, d.account(tok, acct), "10053.00", "10053.00", "0.00", "10053.00", "null")

	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"53.00","requestNonce":"w1"}`, http.StatusCreated, nil)
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"53.00","requestNonce":"w1"}`, http.StatusOK, nil)
	d.checkLedger(acct, "10000.00")

	var deals struct{ Deals []dealJSON }
	must(t, d.web, tok, "GET", fmt.Sprintf("/api/fx/deals?accountId=%d", acct), "", http.StatusOK, &deals)
	var types []string
	for _, dl := range deals.Deals {
		types = append(types, dl.Type)
	}
	if got := strings.Join(types, ","); got != "WITHDRAWAL,PROFIT,PROFIT,COMMISSION,DEPOSIT" {
		t.Fatalf("deals newest first = %s", got)
	}
}

// An EUR account on USDJPY: commission (USD), margin and profit (JPY) reach EUR through the USD
// hub: JPY → USD at 1 / USDJPY mid, USD → EUR at 1 / EURUSD mid.
func TestTradingEURAccountOnUSDJPYThroughTheHub(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(200, "EUR", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.setQuote(tok, "USDJPY", "150.000", "150.020")

	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"USDJPY","side":"BUY","type":"MARKET","volume":"1.00"}`, acct), http.StatusCreated, &o)
	// 7 USD ÷ 1.1001 = 6.3630… → 6.36 EUR.
	if *o.Order.FillPrice != "150.02" || o.Commission.Amount != "-6.36" {
		t.Fatalf("fill = %+v commission %+v", o.Order, o.Commission)
	}
	d.checkLedger(acct, "9993.64")
	// Floating −2000 JPY ÷ (150.010 × 1.1001) = −12.12; margin 150,010 JPY ÷ (150.010 × 1.1001) = 909.01.
	wantMetrics(t, d.account(tok, acct), "9993.64", "9981.52", "909.01", "9072.51", "1098.06")

	d.setQuote(tok, "USDJPY", "151.000", "151.020")
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, &c)
	// (151.000 − 150.020) × 100,000 = 98,000 JPY ÷ (151.010 × 1.1001) = 589.91 EUR.
	if c.Deal.Amount != "589.91" {
		t.Fatalf("close = %+v", c)
	}
	d.checkLedger(acct, "10583.55")
}

// A USD account on EURJPY, a JPY-quoted cross: a sell and an opposite buy (hedging: two
// positions on one symbol) with the hedged margin rate, then both closed.
func TestTradingJPYCrossHedged(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(300, "USD", "100", "5000.00")
	d.setQuote(tok, "USDJPY", "150.000", "150.020")
	d.setQuote(tok, "EURJPY", "165.000", "165.030")

	var sell, buy orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURJPY","side":"SELL","type":"MARKET","volume":"0.50","tp":"160.000"}`, acct), http.StatusCreated, &sell)
	if *sell.Order.FillPrice != "165" || sell.Commission.Amount != "-3.50" {
		t.Fatalf("sell = %+v %+v", sell.Order, sell.Commission)
	}
	// Margin 0.5 × 100,000 × 165.015 ÷ 100 = 82,507.5 JPY ÷ 150.010 = 550.01 USD;
	// floating (165.000 − 165.030) × 50,000 = −1,500 JPY ÷ 150.010 = −10.00.
	wantMetrics(t, d.account(tok, acct), "4996.50", "4986.50", "550.01", "4436.49", "906.62")

	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURJPY","side":"BUY","type":"MARKET","volume":"0.50"}`, acct), http.StatusCreated, &buy)
	// Fully hedged at rate 0.5: 2 × 0.5 lots × 0.5 = 0.5 lots carry margin, the same 550.01.
	// Floating: sell −10.00, buy (165.000 − 165.030) × 50,000 = −1,500 JPY = −10.00.
	wantMetrics(t, d.account(tok, acct), "4993.00", "4973.00", "550.01", "4422.99", "904.17")

	d.setQuote(tok, "EURJPY", "164.000", "164.030")
	var c closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", sell.Position.ID), "", http.StatusOK, &c)
	// The sell closes at the ask: (165.000 − 164.030) × 50,000 = 48,500 JPY ÷ 150.010 = 323.31.
	if c.Deal.Amount != "323.31" {
		t.Fatalf("close sell = %+v", c)
	}
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", buy.Position.ID), "", http.StatusOK, &c)
	// The buy closes at the bid: (164.000 − 165.030) × 50,000 = −51,500 JPY ÷ 150.010 = −343.31.
	if c.Deal.Amount != "-343.31" {
		t.Fatalf("close buy = %+v", c)
	}
	d.checkLedger(acct, "4973.00")
}

// Retries and races: ten concurrent submits with one requestNonce open one position; twenty
// concurrent closes of one position close it once.
func TestTradingNonceAndConcurrentCloses(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(400, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	body := fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.10","requestNonce":"race-1"}`, acct)
	var wg sync.WaitGroup
	codes := make([]int, 10)
	ids := make([]int64, 10)
	for i := range codes {
		wg.Go(func() {
			code, b := call(t, d.web, tok, "POST", "/api/fx/orders", body)
			var o orderResp
			json.Unmarshal(b, &o)
			codes[i], ids[i] = code, o.Order.ID
		})
	}
	wg.Wait()
	created := 0
	for i, c := range codes {
		if c == http.StatusCreated {
			created++
		} else if c != http.StatusOK {
			t.Fatalf("submit %d = %d", i, c)
		}
		if ids[i] != ids[0] {
			t.Fatalf("submits answered different orders: %v", ids)
		}
	}
	var n int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ?", acct).Scan(&n)
	if created != 1 || n != 1 {
		t.Fatalf("%d submits created, %d positions; want 1 and 1", created, n)
	}

	var ps struct{ Positions []positionJSON }
	must(t, d.web, tok, "GET", "/api/fx/positions?status=OPEN", "", http.StatusOK, &ps)
	path := fmt.Sprintf("/api/fx/positions/%d/close", ps.Positions[0].ID)
	closes := make([]int, 20)
	for i := range closes {
		wg.Go(func() { closes[i], _ = call(t, d.web, tok, "POST", path, "") })
	}
	wg.Wait()
	ok := 0
	for i, c := range closes {
		switch c {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Fatalf("close %d = %d", i, c)
		}
	}
	var profits int
	d.e.sql.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `accountId` = ? AND `type` = 'PROFIT'", acct).Scan(&profits)
	if ok != 1 || profits != 1 {
		t.Fatalf("%d closes succeeded and %d profit deals written; want 1 and 1", ok, profits)
	}
	// Sell 0.10 at 1.10000, closed at the ask 1.10020: −2.00; commission 0.70.
	d.checkLedger(acct, "9997.30")
}

// A follower (lost the lease at boot) refuses opens, closes and a withdrawal against open
// positions with the exact texts, and serves everything from the database like the holder.
func TestTradingFollowerRefusesWithTheExactTexts(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(500, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), http.StatusCreated, &o)

	f := d.e.start("follower", "fxdesk-web", "FXDESK_FEED="+d.sim.url, "FXDESK_FEED_KEY=test", "FXDESK_LEASE_TTL=6s", "FXDESK_LEASE_FENCE=2s")
	f.waitLog(10*time.Second, msgHas("role: follower"))

	var e errorResp
	must(t, f, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), http.StatusServiceUnavailable, &e)
	if e.Error.Message != "Pricing is temporarily unavailable for this instrument — please retry shortly" {
		t.Fatalf("open on follower: %q", e.Error.Message)
	}
	must(t, f, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusServiceUnavailable, &e)
	if e.Error.Message != "Pricing is temporarily unavailable for this instrument — please retry shortly" {
		t.Fatalf("close on follower: %q", e.Error.Message)
	}
	must(t, f, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"1.00"}`, http.StatusServiceUnavailable, &e)
	if e.Error.Message != "Pricing is currently unavailable for one of your open positions" {
		t.Fatalf("withdraw on follower: %q", e.Error.Message)
	}
	d.checkLedger(acct, "9999.30")

	// History is the database's: the same answers on both processes. The accounts are marked
	// where they are read (live on the holder, the stored marks here), and on each process the
	// list agrees with the single read.
	for _, path := range []string{"/api/fx/deals", "/api/fx/positions", "/api/fx/orders"} {
		_, a := call(t, d.web, tok, "GET", path, "")
		code, b := call(t, f, tok, "GET", path, "")
		if code != http.StatusOK || !bytes.Equal(a, b) {
			t.Fatalf("%s: follower %d %s, holder %s", path, code, b, a)
		}
	}
	if a := d.listAgrees(f, tok, acct); a.Account.Live == nil || *a.Account.Live || a.Account.Balance != "9999.30" || a.Account.Equity == "" {
		t.Fatalf("follower account = %+v", a.Account)
	}
	if a := d.listAgrees(d.web, tok, acct); a.Account.Live == nil || !*a.Account.Live {
		t.Fatalf("holder account = %+v", a.Account)
	}
}

// dbState is what a refused request must leave exactly as it was.
type dbState map[string]string

func (d *tradingDesk) snapshot() dbState {
	t := d.e.t
	t.Helper()
	s := dbState{}
	// A token's last use is noted for every request it authenticates, refused or not
	// (docs/identity.md): the tokens are compared on everything else.
	var tokens string
	if err := d.e.sql.QueryRow("SELECT CONCAT(COUNT(*), ' ', COALESCE(SUM(CRC32(CONCAT_WS('|', `id`, `tokenHash`, `userId`, `role`, `scopes`, `label`, " +
		"COALESCE(`expiresAt`, ''), COALESCE(`revokedAt`, '')))), 0)) FROM `fx_api_token`").Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	s["fx_api_token"] = tokens
	// An account's stored marks (equity, used margin, when they were marked) are refreshed by the
	// scheduled reconcileFxAccounts whenever it runs, whatever a request did: the accounts are
	// compared on everything else.
	var accounts string
	if err := d.e.sql.QueryRow("SELECT CONCAT(COUNT(*), ' ', COALESCE(SUM(CRC32(CONCAT_WS('|', `id`, `userId`, `accountGroup`, `currency`, `leverage`, `balance`, " +
		"`balanceVersion`, `createdAt`, `swapFree`, `state`, COALESCE(`stateReason`, ''), COALESCE(`marginCallAt`, '')))), 0)) FROM `fx_account`").Scan(&accounts); err != nil {
		t.Fatal(err)
	}
	s["fx_account"] = accounts
	for _, table := range []string{"fx_order", "fx_position", "fx_deal", "fx_instrument", "fx_setting"} {
		var name string
		var sum *int64
		if err := d.e.sql.QueryRow("CHECKSUM TABLE `"+table+"`").Scan(&name, &sum); err != nil {
			t.Fatal(err)
		}
		var n int
		d.e.sql.QueryRow("SELECT COUNT(*) FROM `" + table + "`").Scan(&n)
		s[table] = fmt.Sprintf("rows=%d checksum=%v", n, *sum)
	}
	rows, err := d.e.sql.Query("SELECT `id`, `balance` FROM `fx_account` ORDER BY `id`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var b string
		rows.Scan(&id, &b)
		s["account "+strconv.FormatInt(id, 10)] = b
	}
	return s
}

// Bad input, each answered with a clear 4xx and the database byte for byte as it was.
func TestTradingBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	// No scheduler in this process: the 5-minute reconcile marks every account's equity, and a
	// run falling between two snapshots would pass for a rejected request's write.
	d := newTradingDesk(t, "CRON_MODE=off")
	tok, acct := d.newTrader(600, "USD", "100", "1000.00")
	other, otherAcct := d.newTrader(601, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.setQuote(tok, "GBPUSD", "1.30000", "1.30020")
	d.setQuote(tok, "AUDUSD", "0.65000", "0.65020")
	var o orderResp
	must(t, d.web, other, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, otherAcct), http.StatusCreated, &o)
	var mine orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), http.StatusCreated, &mine)
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"GBPUSD","status":"HALTED"},{"symbol":"AUDUSD","status":"CLOSE_ONLY"}]}`, http.StatusOK, nil)
	// Requests whose nonces a later request reuses with another body.
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.05000","requestNonce":"bad-input-1"}`, acct), http.StatusCreated, nil)
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"10.00","requestNonce":"bad-input-2"}`, http.StatusCreated, nil)

	order := func(fields string) string {
		return fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"%s}`, acct, fields)
	}
	before := d.snapshot()
	for _, tc := range []struct {
		name, token, method, path, body string
		status                          int
	}{
		// Malformed requests never reach the rules.
		{"malformed JSON", tok, "POST", "/api/fx/orders", `{"accountId":`, 400},
		{"two JSON values", tok, "POST", "/api/fx/orders", order("") + "{}", 400},
		{"unknown field", tok, "POST", "/api/fx/orders", order(`,"leverage":500`), 400},
		{"volume as a number", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":0.1}`, acct), 400},
		{"volume in exponent form", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1e-1"}`, acct), 400},
		{"negative volume", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"-0.10"}`, acct), 400},
		{"off-step volume", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.015"}`, acct), 400},
		{"volume above max", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"101"}`, acct), 400},
		{"unknown symbol", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURXYZ","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), 400},
		{"bad side", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"LONG","type":"MARKET","volume":"0.10"}`, acct), 400},
		// Rules that need the instrument and the market.
		{"buy SL above the bid", tok, "POST", "/api/fx/orders", order(`,"sl":"1.10010"`), 400},
		{"buy TP below the bid", tok, "POST", "/api/fx/orders", order(`,"tp":"1.09000"`), 400},
		{"SL with too many digits", tok, "POST", "/api/fx/orders", order(`,"sl":"1.090001"`), 400},
		{"market order with a price", tok, "POST", "/api/fx/orders", order(`,"price":"1.10000"`), 400},
		{"buy limit above the ask", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.20000"}`, acct), 400},
		{"GTD without expiry", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.00000","timeInForce":"GTD"}`, acct), 400},
		{"not enough margin", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"10.00"}`, acct), 409},
		{"resting order beyond free margin", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"100","price":"1.09000"}`, acct), 409},
		{"nonce reused by another order", tok, "POST", "/api/fx/orders", order(`,"requestNonce":"bad-input-1"`), 422},
		{"nonce reused by another deposit", d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"20.00","requestNonce":"bad-input-2"}`, 422},
		{"HALTED instrument", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"GBPUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), 409},
		{"CLOSE_ONLY instrument", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"AUDUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct), 409},
		// Money.
		{"excess withdrawal", tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"5000.00"}`, 409},
		{"withdrawal beyond free margin", tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"990.00"}`, 409},
		{"withdrawal with three decimals", tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"1.001"}`, 400},
		{"zero withdrawal", tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"0"}`, 400},
		{"negative deposit", d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"-5.00"}`, 400},
		{"unknown currency", tok, "POST", "/api/fx/accounts", `{"currency":"XYZ","leverage":100}`, 400},
		{"leverage above the cap", tok, "POST", "/api/fx/accounts", `{"currency":"USD","leverage":5000}`, 400},
		// Closes.
		{"close more than open", tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", mine.Position.ID), `{"volume":"0.20"}`, 409},
		{"close leaving less than the minimum", tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", mine.Position.ID), `{"volume":"0.095"}`, 400},
		// Authorization.
		{"no token", "", "POST", "/api/fx/orders", order(""), 401},
		{"unknown token", "fxd_nope", "GET", "/api/fx/accounts", "", 401},
		{"another trader's account", tok, "GET", fmt.Sprintf("/api/fx/accounts/%d", otherAcct), "", 404},
		{"order on another trader's account", tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, otherAcct), 404},
		{"close another trader's position", tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", 404},
		{"cancel another trader's order", tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", o.Order.ID), "", 404},
		{"withdraw from another trader's account", tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", otherAcct), `{"amount":"1.00"}`, 404},
		{"admin route as a trader", tok, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", acct), `{"amount":"5.00"}`, 403},
		{"bad setting", d.admin, "PUT", "/api/admin/fx/settings", `{"fxTradingQuoteStaleSecondsFx":"0"}`, 400},
		{"unknown setting", d.admin, "PUT", "/api/admin/fx/settings", `{"fxNope":"1"}`, 400},
		{"bad instrument patch", d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","status":"ACTIVE"},{"symbol":"EURUSD","volumeMin":"0"}]}`, 400},
		{"volumeMax past its column", d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","volumeMax":"1000000000"}]}`, 400},
		{"volumeMin off the step", d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","volumeMin":"0.01","volumeStep":"0.03"}]}`, 400},
		{"leverageMax past its range", d.admin, "PUT", "/api/admin/fx/instruments", `{"instruments":[{"symbol":"EURUSD","leverageMax":99999999999}]}`, 400},
		{"pending-order cap out of range", d.admin, "PUT", "/api/admin/fx/settings", `{"fxMaxPendingOrdersPerAccount":"0"}`, 400},
		{"account cap out of range", d.admin, "PUT", "/api/admin/fx/settings", `{"fxMaxAccountsPerUser":"100000"}`, 400},
	} {
		code, b := call(t, d.web, tc.token, tc.method, tc.path, tc.body)
		var e errorResp
		if code != tc.status || json.Unmarshal(b, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with an error body", tc.name, code, b, tc.status)
		}
		if after := d.snapshot(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("%s changed the database:\nbefore %v\nafter  %v", tc.name, before, after)
		}
	}
}

// Resting orders are stored, listed and cancelled; DAY orders expire at the next rollover.
func TestTradingRestingOrders(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	tok, acct := d.newTrader(700, "USD", "100", "1000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	var lim, stop orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.09000","sl":"1.08000","timeInForce":"DAY"}`, acct), http.StatusCreated, &lim)
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"STOP","volume":"0.10","price":"1.09000","timeInForce":"GTD","expiresAt":%q}`, acct, time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), http.StatusCreated, &stop)
	if lim.Order.Status != "PENDING" || stop.Order.Status != "PENDING" || lim.Position != nil {
		t.Fatalf("resting orders = %+v %+v", lim, stop)
	}
	var list struct {
		Orders []struct {
			ID          int64
			Status      string
			TimeInForce string
			ExpiresAt   *time.Time
		}
	}
	must(t, d.web, tok, "GET", "/api/fx/orders?status=PENDING", "", http.StatusOK, &list)
	if len(list.Orders) != 2 || list.Orders[1].ExpiresAt == nil || !list.Orders[1].ExpiresAt.Equal(nextRollover(time.Now()).At) {
		t.Fatalf("pending = %+v", list.Orders)
	}
	must(t, d.web, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", lim.Order.ID), "", http.StatusOK, nil)
	must(t, d.web, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", lim.Order.ID), "", http.StatusConflict, nil)
	must(t, d.web, tok, "GET", "/api/fx/orders?status=PENDING", "", http.StatusOK, &list)
	if len(list.Orders) != 1 || list.Orders[0].ID != stop.Order.ID {
		t.Fatalf("pending after cancel = %+v", list.Orders)
	}
	d.checkLedger(acct, "1000.00")
}
