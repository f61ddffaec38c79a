package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/testkit/soak/invariant"
	"fxdesk/internal/venue"
)

// The A-book of the soaked desk (docs/architecture.md, «A-book execution and the reconciler»): one
// cmd/venuesim process both web processes send EXTERNAL orders to, priced from the one cmd/feedsim
// process they stream from. Its timings are short so that what a fault leaves in SENDING is
// resolved within the end-of-run settle.
const (
	venueLatency      = 40 * time.Millisecond // the venue's execution latency
	venueTimeout      = time.Second           // FXDESK_VENUE_TIMEOUT: one venue call's bound
	venueNotSentAfter = 2 * time.Second       // FXDESK_VENUE_NOT_SENT_AFTER (≥ the timeout)
	venueInterval     = time.Second           // FXDESK_VENUE_INTERVAL: the reconciler's period
	hedgeInterval     = time.Second           // FXDESK_HEDGE_INTERVAL: the hedger's slow pass
	venueAccount      = "soak-venue"
	venueToken        = "soak-venue-token" // guards nothing but the soak's loopback venue
	abookGroup        = "abook"            // the EXTERNAL account group of the A-book traders
)

// sim is a simulator process (cmd/feedsim or cmd/venuesim). Neither is ever faulted as a
// process: the venue's faults go through its control API.
type sim struct {
	name    string
	cmd     *exec.Cmd
	done    chan struct{}
	url     string // feed: ws://…/forex; venue: the trading API's base URL
	control string // the control API's base URL, http://host:port
}

// startSim runs binary with args, logging to name.log, and returns it with the first line it
// printed on stdout (the simulators print their URLs there once listening).
func startSim(dir, binDir, name, binary string, args ...string) (*sim, string, error) {
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(filepath.Join(binDir, binary), args...)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, "", err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, "", err
	}
	s := &sim{name: name, cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		rd := bufio.NewReader(out)
		line, _ := rd.ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(logFile, rd)
	}()
	go func() { cmd.Wait(); logFile.Close(); close(s.done) }()
	select {
	case line := <-lines:
		if line == "" {
			s.stop()
			return nil, "", fmt.Errorf("%s printed nothing on start; see %s.log", name, name)
		}
		return s, line, nil
	case <-time.After(15 * time.Second):
		s.stop()
		return nil, "", fmt.Errorf("%s did not print its URL within 15 s; see %s.log", name, name)
	}
}

func (s *sim) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// startFeed runs a feed simulator named name (its log is name.log) with the market seed: the
// primary and the backup price source every web process streams from (the gaps move both).
func startFeed(dir, binDir, name string, marketSeed uint64) (*sim, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s, line, err := startSim(dir, binDir, name, "fxdesk-feedsim", "-addr", addr, "-always-open", "-seed", strconv.FormatUint(marketSeed, 10))
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "ws://") {
		s.stop()
		return nil, fmt.Errorf("feedsim printed %q, not its ws:// URL", line)
	}
	s.url, s.control = line, "http://"+addr
	return s, nil
}

// venueLane is the soak's venue: the REST venue simulator (venueSim) or the FIX venue (fixLane).
// Both web processes send their EXTERNAL business to it; its faults go through its control API.
type venueLane interface {
	lane() string     // invariant.LaneREST or invariant.LaneFIX
	describe() string // where it listens, for the run log
	deskEnv() []string
	// state is the venue's state for the checks under load, endState for the end's.
	state() (*invariant.VenueState, error)
	endState(ctx context.Context) (*invariant.VenueState, error)
	release() (int, error) // sends every held answer; how many
	inject(ctx context.Context, f fault) (note string, err error)
	controls() string // what the venue's controls did, for the summary ("" if nothing to add)
	stop()
}

// venueLaneOf is the venue lane of a soak: forced (rest or fix), or by seed ("seed" or empty) —
// FIX for a third of the seeds (seed % 3 == 0), REST for the others.
func venueLaneOf(seed uint64, forced string) (string, error) {
	switch forced {
	case invariant.LaneREST, invariant.LaneFIX:
		return forced, nil
	case "", "seed":
		if seed%3 == 0 {
			return invariant.LaneFIX, nil
		}
		return invariant.LaneREST, nil
	}
	return "", fmt.Errorf("-venue %q: rest, fix, or seed (or empty) to pick by seed", forced)
}

// startVenueLane starts lane's venue, priced from feed; a FIX venue executes as knobs say.
// balance is the REST venue account's opening deposit: a pre-filled history's open book is the
// hedger's to hedge too, and more than the default million's margin carries.
func startVenueLane(lane, dir, binDir string, feed *sim, knobs fixVenueKnobs, balance string) (venueLane, error) {
	if lane == invariant.LaneFIX {
		v, err := startFIXVenue(dir, binDir, feed, knobs)
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	v, err := startVenue(dir, binDir, feed, balance)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// venueSim is the venue simulator process and what the soak reads and injects through it.
type venueSim struct {
	*sim
	account string
}

// startVenue runs the venue simulator, priced from feed.
func startVenue(dir, binDir string, feed *sim, balance string) (*venueSim, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	control, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s, line, err := startSim(dir, binDir, "venuesim", "fxdesk-venuesim", "-addr", addr, "-control-addr", control,
		"-account", venueAccount, "-token", venueToken, "-latency", venueLatency.String(), "-feed-control", feed.control, "-balance", balance)
	if err != nil {
		return nil, err
	}
	url, ctl, account, err := venuesim.ParseListening(line)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.url, s.control = url, ctl
	return &venueSim{sim: s, account: account}, nil
}

func (v *venueSim) lane() string { return invariant.LaneREST }

func (v *venueSim) describe() string {
	return fmt.Sprintf("venue %s (rest, cmd/venuesim; control %s)", v.url, v.control)
}

func (v *venueSim) controls() string { return "" }

// endState is the state with every trade's close fills, read from the trading API.
func (v *venueSim) endState(ctx context.Context) (*invariant.VenueState, error) {
	vs, err := v.state()
	if err != nil {
		return nil, err
	}
	vs.CloseFills, err = v.closeFills(ctx)
	return vs, err
}

// deskEnv is a web process's venue configuration: unpaced connections (a simulator on
// loopback), and timeouts short enough that the settle after the load outlasts them.
func (v *venueSim) deskEnv() []string {
	return []string{
		"FXDESK_VENUE=" + v.url,
		"FXDESK_VENUE_ACCOUNT=" + v.account,
		"FXDESK_VENUE_TOKEN=" + venueToken,
		"FXDESK_VENUE_CONNECT_RATE=0",
		"FXDESK_VENUE_CONCURRENCY=64",
		"FXDESK_VENUE_TIMEOUT=" + venueTimeout.String(),
		"FXDESK_VENUE_NOT_SENT_AFTER=" + venueNotSentAfter.String(),
		"FXDESK_VENUE_INTERVAL=" + venueInterval.String(),
		"FXDESK_HEDGE_INTERVAL=" + hedgeInterval.String(),
	}
}

// post sends a control request and decodes its answer into out (when not nil).
func (v *venueSim) post(path string, body, out any) error {
	return controlPost(v.control, path, body, out)
}

// controlPost sends a control request to a simulator's control API at base and decodes its
// answer into out (when not nil).
func controlPost(base, path string, body, out any) error {
	b, _ := json.Marshal(body)
	resp, err := httpClient.Post(base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("venue control %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("venue control %s %s: status %d: %s", path, b, resp.StatusCode, invariant.Truncate(string(raw), 200))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func (v *venueSim) fault(kind string, count int, d time.Duration) error {
	body := map[string]any{"kind": kind}
	if count > 0 {
		body["count"] = count
	}
	if d > 0 {
		body["seconds"] = d.Seconds()
	}
	return v.post("/control/fault", body, nil)
}

func (v *venueSim) release() (int, error) {
	var out struct {
		Released int `json:"released"`
	}
	err := v.post("/control/release", struct{}{}, &out)
	return out.Released, err
}

func (v *venueSim) closeTrade(id string) error {
	return v.post("/control/close-trade", map[string]any{"tradeId": id}, nil)
}

func (v *venueSim) state() (*invariant.VenueState, error) {
	resp, err := httpClient.Get(v.control + "/control/state")
	if err != nil {
		return nil, fmt.Errorf("venue state: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("venue state: status %d", resp.StatusCode)
	}
	st := &invariant.VenueState{Lane: invariant.LaneREST, At: time.Now()}
	if err := json.NewDecoder(resp.Body).Decode(st); err != nil {
		return nil, fmt.Errorf("venue state: %w", err)
	}
	return st, nil
}

// closeFills reads every transaction from the venue's trading API with the desk's own client,
// and returns each trade's closing fill prices. A request the venue does not answer (an outage,
// a 5xx fault still pending) is retried.
func (v *venueSim) closeFills(ctx context.Context) (map[string][]decimal.Decimal, error) {
	client, err := venue.NewClient(venue.ClientConfig{BaseURL: v.url, AccountID: v.account, Token: venueToken, HTTP: httpClient})
	if err != nil {
		return nil, err
	}
	out := map[string][]decimal.Decimal{}
	since := int64(0)
	for tries := 0; tries < 200; tries++ {
		txs, last, err := client.TransactionsSince(ctx, since)
		if errors.Is(err, venue.ErrNotSent) || errors.Is(err, venue.ErrOutcomeUnknown) {
			time.Sleep(200 * time.Millisecond) // an outage's end has no signal the soak can wait on
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("venue transactions since %d: %w", since, err)
		}
		for _, t := range txs {
			since = max(since, t.ID)
			if t.Type != "ORDER_FILL" {
				continue
			}
			for _, ch := range t.Changes {
				out[ch.TradeID] = append(out[ch.TradeID], ch.Price)
			}
		}
		if len(txs) == 0 || since >= last {
			return out, nil
		}
	}
	return nil, fmt.Errorf("venue transactions: no complete read after 200 tries")
}

// injectVenue plays one venue fault through the lane's venue.
func (in *injector) injectVenue(ctx context.Context, f fault) {
	t0 := time.Now()
	note, err := in.c.venue.inject(ctx, f)
	if err != nil {
		in.fail("%s: %v", f.Kind, err)
		if note == "" {
			return
		}
	}
	in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: note})
}

// inject plays one venue fault through the venue simulator's control API and says what it did.
func (v *venueSim) inject(ctx context.Context, f fault) (string, error) {
	switch f.Kind {
	case faultVenueTimeout:
		if err := v.fault("timeout", f.Count, f.HoldFor); err != nil {
			return "", err
		}
		return fmt.Sprintf("next %d orders or closes unanswered", f.Count), nil
	case faultVenueHold:
		if err := v.fault("hold", f.Count, 0); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.HoldFor):
		}
		n, err := v.release()
		if err != nil {
			err = fmt.Errorf("release: %w", err)
		}
		return fmt.Sprintf("next %d orders held %s, %d released", f.Count, f.HoldFor, n), err
	case faultVenue5xx:
		if err := v.fault("5xx", f.Count, 0); err != nil {
			return "", err
		}
		return fmt.Sprintf("next %d requests 503", f.Count), nil
	case faultVenueOutage:
		if err := v.fault("outage", 0, f.DownFor); err != nil {
			return "", err
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.DownFor):
		}
		// The outage lasts until the listener listens again, a moment past its seconds; the next
		// outage is refused before then.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
			if st, err := v.state(); err == nil && st.OutageUntil == nil {
				break
			}
			time.Sleep(50 * time.Millisecond) // the control API has no notification
		}
		return fmt.Sprintf("down %s", f.DownFor), nil
	case faultVenueClose:
		st, err := v.state()
		if err != nil {
			return "", err
		}
		var open []invariant.VenueTrade
		for _, t := range st.Trades {
			if t.State == "OPEN" && t.Tag == "fxdesk" {
				open = append(open, t)
			}
		}
		if len(open) == 0 {
			return "no open EXTERNAL trade to close", nil
		}
		t := open[min(len(open)-1, int(f.Pick*float64(len(open))))]
		// A close the desk sends meanwhile may win the race: the trade is then gone, not a fault.
		if err := v.closeTrade(t.ID); err != nil && !strings.Contains(err.Error(), "404") {
			return "", fmt.Errorf("trade %s: %w", t.ID, err)
		}
		return fmt.Sprintf("trade %s (client id %s, %s %s) closed at the venue", t.ID, t.ClientID, t.Symbol, t.CurrentUnits), nil
	}
	return "", fmt.Errorf("not a venue fault")
}

// abookGroup creates the EXTERNAL account group as an operator would: the row in SQL (the
// desk has no route that creates groups), the execution mode through the admin API.
func (c *cluster) abookGroup(ctx context.Context, j *journal, web *proc) error {
	if _, err := c.direct.ExecContext(ctx, "INSERT INTO `fx_account_group` (`name`) VALUES (?)", abookGroup); err != nil {
		return fmt.Errorf("create account group %s: %w", abookGroup, err)
	}
	// Journaled like every admin write, with its request id: the audit trail check finds it.
	e := j.callID(ctx, web, c.staff[auth.RoleRisk], string(auth.RoleRisk), "setup", http.MethodPut, "/api/admin/fx/account-groups/"+abookGroup, "soak-setup-abook",
		map[string]string{"executionMode": "EXTERNAL"})
	if e.Outcome != invariant.Answered || e.Status != http.StatusOK {
		return fmt.Errorf("set %s EXTERNAL: %d %s %s", abookGroup, e.Status, e.Resp, e.Err)
	}
	return nil
}

// joinGroup moves a new account (no positions yet) into group, in SQL as an operator would.
func (c *cluster) joinGroup(ctx context.Context, account int64, group string) error {
	if _, err := c.direct.ExecContext(ctx, "UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, account); err != nil {
		return fmt.Errorf("account %d into group %s: %w", account, group, err)
	}
	return nil
}

// reconcileRun is one "execution reconciler ran" line of a web process's log.
type reconcileRun struct {
	Time    time.Time `json:"time"`
	Reason  string    `json:"reason"`
	Actions int       `json:"actions"`
	Failed  int       `json:"failed"`
	proc    string
}

// reconcileLog reads the reconciler's runs from the web processes' logs as they grow.
type reconcileLog struct {
	c       *cluster
	offsets map[string]int64
}

func (l *reconcileLog) read() []reconcileRun {
	var out []reconcileRun
	for _, p := range l.c.all() {
		if p.kind != "web" {
			continue
		}
		f, err := os.Open(filepath.Join(l.c.dir, p.name+".log"))
		if err != nil {
			continue
		}
		f.Seek(l.offsets[p.name], io.SeekStart)
		rd := bufio.NewReader(f)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				break // a partial last line is read again next time
			}
			l.offsets[p.name] += int64(len(line))
			if !bytes.Contains(line, []byte(`"execution reconciler ran"`)) {
				continue
			}
			var r reconcileRun
			if json.Unmarshal(line, &r) == nil {
				r.proc = p.name
				out = append(out, r)
			}
		}
		f.Close()
	}
	return out
}

// settleVenue releases held venue answers and waits until the holder has reconciled past
// NOT_SENT_AFTER after the desk went quiet at quiet: a run logged after quiet + NOT_SENT_AFTER,
// then a run after it (so it surely gathered past that instant) that planned nothing.
func settleVenue(ctx context.Context, c *cluster, logger interface{ Printf(string, ...any) }, quiet time.Time) error {
	if n, err := c.venue.release(); err != nil {
		return err
	} else if n > 0 {
		logger.Printf("soak: settle: released %d held venue answers", n)
	}
	l := &reconcileLog{c: c, offsets: map[string]int64{}}
	target := quiet.Add(venueNotSentAfter)
	deadline := time.Now().Add(venueNotSentAfter + 30*time.Second)
	var past *reconcileRun
	var last reconcileRun
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for _, r := range l.read() {
			last = r
			switch {
			case past == nil && !r.Time.Before(target):
				past = &r
			case past != nil && r.Time.After(past.Time) && r.Actions == 0:
				logger.Printf("soak: settle: %s reconciled with nothing left to do at %s (%s after the desk went quiet)", r.proc, invariant.TimeOfDay(r.Time), r.Time.Sub(quiet).Round(time.Millisecond))
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond) // a log line has no notification
	}
	return fmt.Errorf("no reconcile past NOT_SENT_AFTER planned nothing within %s of the desk going quiet (last run: %+v)", time.Since(quiet).Round(time.Second), last)
}

// The hedger's terms in the soak: EURUSD and GBPUSD net exposure held within 2 lots either side,
// hedged back to 1.5; the other symbols unhedged.
var hedgeSettings = map[string]string{"fxHedgeLimitLots.EURUSD": "2", "fxHedgeLimitLots.GBPUSD": "2", "fxHedgeBandLots": "0.5", "fxHedgeMinLots": "0.05"}

// hedgeSettleFor bounds the wait for the hedger at the end: its back-off after the faults' venue
// failures reaches a minute.
const hedgeSettleFor = 90 * time.Second

// settleHedger waits until every limited symbol's net exposure is inside its limit (the venue up,
// the desk quiet), and answers whether the hedger had anything left to do when the wait began.
func settleHedger(ctx context.Context, c *cluster, logger interface{ Printf(string, ...any) }) bool {
	start := time.Now()
	var broken []string
	for first := true; ctx.Err() == nil; first = false {
		s, err := invariant.ReadSnapshot(ctx, c.direct, c.scope)
		if err == nil {
			if broken = invariant.HedgeLimitsBroken(s); len(broken) == 0 {
				if !first {
					logger.Printf("soak: settle: the hedger brought every net exposure inside its limit %s after the venue settled", time.Since(start).Round(time.Millisecond))
				}
				return !first
			}
		}
		if time.Since(start) > hedgeSettleFor {
			logger.Printf("soak: settle: net exposure still past its limit %s after the venue settled: %s", hedgeSettleFor, strings.Join(broken, "; "))
			return true
		}
		time.Sleep(500 * time.Millisecond) // the hedger's work shows only in the database
	}
	return false
}

// finalVenueCheck checks the A-book at the end. The prices still move after the load, so a
// stop may be closing a trade between the two reads: a read that breaks an invariant is taken
// again, up to ten times a second apart, and only what persists is reported.
func finalVenueCheck(ctx context.Context, c *cluster, logger interface{ Printf(string, ...any) }, quiet time.Time) []invariant.Result {
	var rs []invariant.Result
	drops := watchDrops(c)
	for attempt := 1; attempt <= 10; attempt++ {
		s, err := invariant.ReadSnapshot(ctx, c.direct, c.scope)
		if err != nil {
			logger.Printf("soak: final venue check: %v", err)
			continue
		}
		vs, err := c.venue.endState(ctx)
		if err != nil {
			logger.Printf("soak: final venue check: %v", err)
			continue
		}
		rs = invariant.CheckVenueEnd(s, vs, quiet, drops)
		bad := 0
		for _, r := range rs {
			bad += len(r.Violations)
		}
		logger.Printf("soak: final venue check (read %d): %d invariants, %d violating rows", attempt, len(rs), bad)
		if bad == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second) // whatever a stop was closing has landed by then
	}
	if rs == nil {
		r := invariant.Result{Name: "venueTradesLinked", Figures: "the venue or the database could not be read"}
		r.Add("", "no final read of the venue and the database succeeded; see the log above")
		rs = []invariant.Result{r}
	}
	return rs
}
