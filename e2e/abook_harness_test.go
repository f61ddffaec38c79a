package e2e

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The A-book harness: a real fxdesk-venuesim process per test, priced from the test's own
// fxdesk-feedsim through its control API, so the venue fills where the desk quotes.

const venueToken = "venue-e2e-token"

// venueSim is one fxdesk-venuesim process.
type venueSim struct {
	t       *testing.T
	feed    *feedSim
	latency string
	token   string // the one bearer token the venue accepts
	cmd     *exec.Cmd
	done    chan struct{}
	url     string // http://ADDR, the desk's FXDESK_VENUE
	control string // http://CONTROL-ADDR
	account string

	mu  sync.Mutex
	log []string
}

// startVenueSim starts a venue simulator priced by feed with latency (e.g. "20ms") on a free
// port.
func startVenueSim(t *testing.T, feed *feedSim, latency string) *venueSim {
	t.Helper()
	return startVenueSimWithToken(t, feed, latency, venueToken)
}

// startVenueSimWithToken is startVenueSim accepting token alone.
func startVenueSimWithToken(t *testing.T, feed *feedSim, latency, token string) *venueSim {
	t.Helper()
	v := &venueSim{t: t, feed: feed, latency: latency, token: token}
	v.run("127.0.0.1:0")
	t.Cleanup(func() {
		v.kill()
		if t.Failed() {
			v.mu.Lock()
			t.Logf("--- venuesim log ---\n%s", strings.Join(v.log, "\n"))
			v.mu.Unlock()
		}
	})
	return v
}

// run starts the process listening on addr and waits for the line that names its URLs.
func (v *venueSim) run(addr string) {
	t := v.t
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "fxdesk-venuesim"), "-addr", addr, "-control-addr", "127.0.0.1:0",
		"-latency", v.latency, "-feed-control", v.feed.base)
	cmd.Env = append(os.Environ(), "VENUESIM_TOKEN="+v.token) // off the command line, as an operator would
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			v.mu.Lock()
			v.log = append(v.log, sc.Text())
			v.mu.Unlock()
		}
		cmd.Wait()
		close(done)
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("venuesim printed no URLs: %v", err)
	}
	go io.Copy(io.Discard, out)
	fields := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, val, ok := strings.Cut(f, "="); ok {
			fields[k] = val
		}
	}
	if !strings.HasPrefix(line, "venuesim listening ") || fields["url"] == "" || fields["control"] == "" || fields["account"] == "" {
		cmd.Process.Kill()
		t.Fatalf("venuesim printed %q", line)
	}
	v.cmd, v.done = cmd, done
	v.url, v.control, v.account = fields["url"], fields["control"], fields["account"]
}

// kill SIGKILLs the process and waits for it (the venue is gone, with all its state).
func (v *venueSim) kill() {
	if v.cmd == nil {
		return
	}
	v.cmd.Process.Kill()
	<-v.done
}

// restart starts a fresh venue (no trades) on the address the killed one listened on, so the
// desk's configured URL reaches it again.
func (v *venueSim) restart() {
	v.t.Helper()
	v.run(strings.TrimPrefix(v.url, "http://"))
}

// env is what a web process needs to trade through this venue: a short reconcile interval and
// unpaced connections (the desk's default pacing is the real venue's 2 per second).
func (v *venueSim) env() []string {
	return []string{"FXDESK_VENUE=" + v.url, "FXDESK_VENUE_ACCOUNT=" + v.account, "FXDESK_VENUE_TOKEN=" + v.token,
		"FXDESK_VENUE_CONNECT_RATE=0", "FXDESK_VENUE_INTERVAL=500ms"}
}

// venueState is the part of GET /control/state the tests read.
type venueState struct {
	Held           int            `json:"held"`
	OrdersExecuted int            `json:"ordersExecuted"`
	ClosesExecuted int            `json:"closesExecuted"`
	OrderRequests  map[string]int `json:"orderRequests"`
	Requests       map[string]int `json:"requests"`
	Trades         []venueTrade   `json:"trades"`
}

type venueTrade struct {
	ID                string           `json:"id"`
	Symbol            string           `json:"symbol"`
	State             string           `json:"state"`
	ClientID          string           `json:"clientId"`
	Tag               string           `json:"tag"`
	InitialUnits      decimal.Decimal  `json:"initialUnits"`
	CurrentUnits      decimal.Decimal  `json:"currentUnits"`
	Price             decimal.Decimal  `json:"price"`
	AverageClosePrice *decimal.Decimal `json:"averageClosePrice"`
	RealizedPL        decimal.Decimal  `json:"realizedPL"`
	OpenTime          time.Time        `json:"openTime"`
}

// tradesOf are the trades carrying clientID.
func (s venueState) tradesOf(clientID string) []venueTrade {
	var out []venueTrade
	for _, tr := range s.Trades {
		if tr.ClientID == clientID {
			out = append(out, tr)
		}
	}
	return out
}

func (s venueState) trade(id string) (venueTrade, bool) {
	for _, tr := range s.Trades {
		if tr.ID == id {
			return tr, true
		}
	}
	return venueTrade{}, false
}

func (v *venueSim) state() venueState {
	v.t.Helper()
	return controlState[venueState](v.t, v.control, "venuesim")
}

// controlState reads a simulator's state from its control API (GET <control>/control/state).
func controlState[T any](t testing.TB, control, name string) T {
	t.Helper()
	resp, err := http.Get(control + "/control/state")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s T
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("%s state: %v", name, err)
	}
	return s
}

// controlErr posts body to /control/<what> and returns the answer; it only returns errors, so
// any goroutine may call it.
func (v *venueSim) controlErr(what, body string) ([]byte, error) {
	resp, err := http.Post(v.control+"/control/"+what, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("venuesim control/%s %s = %d %s", what, body, resp.StatusCode, b)
	}
	return b, nil
}

func (v *venueSim) controlJSON(what, body string, out any) {
	v.t.Helper()
	b, err := v.controlErr(what, body)
	if err != nil {
		v.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			v.t.Fatalf("venuesim control/%s: decode %s: %v", what, b, err)
		}
	}
}

// abookDesk is a trading desk whose holder trades through a venue simulator, with one account
// group, "abook", in EXTERNAL mode; every account starts in the INTERNAL "default" group.
type abookDesk struct {
	*tradingDesk
	venue *venueSim
	env   []string // the web process's environment, for replacements
}

const abookGroup = "abook"

// newABookDesk starts a feed simulator, a venue simulator priced by it and one holder web
// process trading through the venue; env entries override the web process's environment.
func newABookDesk(t *testing.T, env ...string) *abookDesk {
	t.Helper()
	e := newDeskEnv(t)
	feed := startFeedSim(t)
	return startABookDesk(e, feed, startVenueSim(t, feed, "20ms"), "web", env...)
}

// startABookDesk starts holder name on e, fed by feed and trading through v, and makes the
// "abook" group EXTERNAL.
func startABookDesk(e *deskEnv, feed *feedSim, v *venueSim, name string, env ...string) *abookDesk {
	td, webEnv := startExternalDesk(e, feed, v.env(), name, env...)
	return &abookDesk{tradingDesk: td, venue: v, env: webEnv}
}

// startExternalDesk starts holder name on e, fed by feed, with venueEnv (the venue's settings)
// and env, and makes the "abook" group EXTERNAL. It answers the desk and the web process's
// environment, for replacements.
func startExternalDesk(e *deskEnv, feed *feedSim, venueEnv []string, name string, env ...string) (*tradingDesk, []string) {
	t := e.t
	t.Helper()
	webEnv := append([]string{"FXDESK_FEED=" + feed.url, "FXDESK_FEED_KEY=test"}, venueEnv...)
	webEnv = append(webEnv, env...)
	web := e.start(name, "fxdesk-web", webEnv...)
	web.waitLog(10*time.Second, msgHas("role: holder"))
	web.waitLog(30*time.Second, msgIs(msgRiskWatching)) // a holder takes orders once its risk view watches
	d := &tradingDesk{e: e, sim: feed, web: web, admin: e.adminToken()}
	// There is no route to create an account group: the operator's SQL.
	if _, err := e.sql.Exec("INSERT INTO `fx_account_group` (`name`) VALUES (?)", abookGroup); err != nil {
		t.Fatal(err)
	}
	var g struct {
		AccountGroup struct {
			Name          string `json:"name"`
			ExecutionMode string `json:"executionMode"`
		} `json:"accountGroup"`
	}
	must(t, web, d.admin, "PUT", "/api/admin/fx/account-groups/"+abookGroup, `{"executionMode":"EXTERNAL"}`, http.StatusOK, &g)
	if g.AccountGroup.ExecutionMode != "EXTERNAL" {
		t.Fatalf("account group after PUT = %+v", g.AccountGroup)
	}
	return d, webEnv
}

// externalTrader opens a funded USD account for user and moves it to the EXTERNAL group.
func (d *tradingDesk) externalTrader(user int64, deposit string) (string, int64) {
	t := d.e.t
	t.Helper()
	tok, acct := d.newTrader(user, "USD", "100", deposit)
	d.moveToABook(acct)
	return tok, acct
}

func (d *tradingDesk) moveToABook(acct int64) {
	d.e.t.Helper()
	if _, err := d.e.sql.Exec("UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", abookGroup, acct); err != nil {
		d.e.t.Fatal(err)
	}
}

// marketOrder is a MARKET order body on EURUSD.
func marketOrder(acct int64, side, volume, nonce string) string {
	return fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":%q,"type":"MARKET","volume":%q,"requestNonce":%q}`, acct, side, volume, nonce)
}

// reply is one HTTP exchange made off the test's goroutine.
type reply struct {
	code int
	body []byte
	err  error
}

// send is call for goroutines: it never fails the test itself.
func send(p *proc, token, method, path, body string) reply {
	req, err := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{code: resp.StatusCode, body: b, err: err}
}

// sendAsync sends on a goroutine; the channel yields its answer.
func sendAsync(p *proc, token, method, path, body string) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- send(p, token, method, path, body) }()
	return ch
}

// awaitAnswer waits for an asynchronous answer with a deadline.
func awaitAnswer(t *testing.T, ch <-chan reply, timeout time.Duration) reply {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(timeout):
		t.Fatalf("no answer within %s", timeout)
		return reply{}
	}
}

// orderRow is an fx_order row as the desk wrote it.
type orderRow struct {
	Status       string
	Execution    string
	FillPrice    decimal.NullDecimal
	VenueReason  sql.NullString
	VenueOrderID sql.NullString
}

func (e *deskEnv) orderRow(id int64) orderRow {
	e.t.Helper()
	var o orderRow
	if err := e.sql.QueryRow("SELECT `status`, `execution`, `fillPrice`, `venueReason`, `venueOrderId` FROM `fx_order` WHERE `id` = ?", id).
		Scan(&o.Status, &o.Execution, &o.FillPrice, &o.VenueReason, &o.VenueOrderID); err != nil {
		e.t.Fatalf("order %d: %v", id, err)
	}
	return o
}

// positionRow is an fx_position row as the desk wrote it.
type positionRow struct {
	ID          int64
	Status      string
	Volume      decimal.Decimal
	OpenPrice   decimal.Decimal
	VenueTrade  sql.NullString
	CloseReason sql.NullString
	ClosePrice  decimal.NullDecimal
	OpenedAt    time.Time
}

const positionRowCols = "`id`, `status`, `volume`, `openPrice`, `venueTradeId`, `closeReason`, `closePrice`, `openedAt`"

func scanPositionRow(sc interface{ Scan(...any) error }) (positionRow, error) {
	var p positionRow
	err := sc.Scan(&p.ID, &p.Status, &p.Volume, &p.OpenPrice, &p.VenueTrade, &p.CloseReason, &p.ClosePrice, &p.OpenedAt)
	return p, err
}

func (e *deskEnv) positionRow(id int64) positionRow {
	e.t.Helper()
	p, err := scanPositionRow(e.sql.QueryRow("SELECT "+positionRowCols+" FROM `fx_position` WHERE `id` = ?", id))
	if err != nil {
		e.t.Fatalf("position %d: %v", id, err)
	}
	return p
}

// positionsOfOrder are the positions order id opened (one, or none).
func (e *deskEnv) positionsOfOrder(id int64) []positionRow {
	e.t.Helper()
	rows, err := e.sql.Query("SELECT "+positionRowCols+" FROM `fx_position` WHERE `orderId` = ?", id)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []positionRow
	for rows.Next() {
		p, err := scanPositionRow(rows)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// deskBook is the book section of /api/admin/fx/desk.
type deskBook struct {
	Book *struct {
		Venue *struct {
			Reachable bool `json:"reachable"`
		} `json:"venue"`
		Sending []struct {
			OrderID int64 `json:"orderId"`
		} `json:"sending"`
	} `json:"book"`
}

func (p *proc) book() deskBook {
	p.t.Helper()
	var b deskBook
	must(p.t, p, p.env.adminToken(), "GET", "/api/admin/fx/desk", "", http.StatusOK, &b)
	if b.Book == nil || b.Book.Venue == nil {
		p.t.Fatalf("%s: the desk shows no venue book", p.name)
	}
	return b
}

// reconciledAgain waits for an "execution reconciler ran" line of p past the lines read so far.
func (p *proc) reconciledAgain(timeout time.Duration) {
	p.t.Helper()
	p.waitNth(timeout, p.lineCount(), 1, msgIs("execution reconciler ran"))
}

// wantEveryTaggedTradeBooked asserts that every fxdesk-tagged open trade at the venue is
// linked to exactly one open desk position — a hedge-book trade (client id "H<id>") to one open
// hedge position — and every open linked position to an open trade.
func (d *abookDesk) wantEveryTaggedTradeBooked() {
	t := d.e.t
	t.Helper()
	st := d.venue.state()
	open := map[string]bool{}
	for _, tr := range st.Trades {
		if tr.State != "OPEN" || tr.Tag != "fxdesk" {
			continue
		}
		open[tr.ID] = true
		table := "`fx_position`"
		if strings.HasPrefix(tr.ClientID, "H") {
			table = "`fx_hedge_position`"
		}
		var n int
		if err := d.e.sql.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE `status` = 'OPEN' AND `venueTradeId` = ?", tr.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("venue trade %s (client id %s, %s units) is linked to %d open desk positions, want 1", tr.ID, tr.ClientID, tr.CurrentUnits, n)
		}
	}
	rows, err := d.e.sql.Query("SELECT `id`, `venueTradeId` FROM `fx_position` WHERE `status` = 'OPEN' AND `venueTradeId` IS NOT NULL " +
		"UNION ALL SELECT -`id`, `venueTradeId` FROM `fx_hedge_position` WHERE `status` = 'OPEN'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var trade string
		rows.Scan(&id, &trade)
		if !open[trade] {
			t.Errorf("desk position %d (negative: a hedge position) is linked to venue trade %s, which is not an open tagged trade at the venue", id, trade)
		}
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }
