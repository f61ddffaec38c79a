package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/soak/invariant"
)

// The FIX lane (docs/soak.md, «The FIX lane»): one cmd/fixvenue process priced from the soak's
// feed, and one session file both web processes are given. Only the lease holder logs on; the
// session's sequence numbers live in the soak's database, so a kill or a takeover resumes them.
// The venue's message store is in memory and the venue is never restarted.

// fixHeartbeat is the session's HeartBtInt. It is short like the soak's lease: a SIGSTOPped
// holder's connection stays open, and the venue refuses the new holder's logon until it has
// missed the stopped one's heartbeats (about two intervals).
const fixHeartbeat = 1

// Which of the FIX venue's controls each soak venue fault plays (docs/soak.md): the fault names
// stay the soak's, the summary's fix={…} counts the controls used.
const (
	fixHold   = "hold"   // venueHold; venueTimeout when its count is odd: held, then released
	fixLose   = "lose"   // venueTimeout when its count is even: executed, never reported
	fixReject = "reject" // venue5xx: refused with OrdRejReason 3
	fixDrop   = "drop"   // venueOutage: the session cut, every reconnect refused for the outage
	fixClose  = "close"  // venueClose: the venue closes its net in one symbol itself
	// venueOddUnits: the venue can fill only odd units of the next orders (oddunits.go)
	fixPartial = fixvenue.FaultPartial
)

var fixControls = []string{fixHold, fixLose, fixReject, fixDrop, fixClose, fixPartial}

// fixVenueKnobs are how the FIX venue of a seed executes beyond the bundled venue's plain fill:
// the behaviours of real liquidity providers cmd/fixvenue can play (docs/soak.md, «The FIX
// lane»). They are drawn from the seed (fixVenueKnobsOf), logged at the start of the run, and
// given to the venue by venueArgs (its flags) and the schedule (odd units, a fault).
type fixVenueKnobs struct {
	// ExecutionsPerFill: the venue fills each order in this many executions, each an
	// ExecutionReport of its own with its ExecID, LastQty and LastPx (1: one execution). The desk
	// must record and sum every one (venueExecutionsBooked reads them per ExecID from
	// VenueOrder.Executions; -executions N).
	ExecutionsPerFill int
	// NumericClOrdIDs: the venue's own orders (venue-side closes) carry numeric ClOrdIDs, some
	// equal to a desk order id, instead of VENUE-<…> (-own-clordids numeric). The desk must tell
	// them apart by its own journal; fixVenueState and the checks' fixOrderOf take the venue's
	// word for which orders are its own (Order.Own), never a prefix.
	NumericClOrdIDs bool
	// OddUnits: now and then the venue can fill only odd units (12,345 of 20,000) of the next
	// orders (the fault venueOddUnits, oddunits.go). The desk's orders are fill-or-kill, so the
	// venue cancels them: the desk must book none of them, and never round units to lots
	// (venueFillsBooked, venueNetMatches and venueExecutionsBooked compare units exactly).
	OddUnits bool
}

// fixVenueKnobsOf draws seed's knobs from a generator of their own, so no fault moves.
func fixVenueKnobsOf(seed uint64) fixVenueKnobs {
	rng := rand.New(rand.NewPCG(seed, seed^0x6e0b5))
	return fixVenueKnobs{ExecutionsPerFill: 1 + rng.IntN(3), NumericClOrdIDs: rng.IntN(2) == 0, OddUnits: rng.IntN(2) == 0}
}

func (k fixVenueKnobs) String() string {
	return fmt.Sprintf("executionsPerFill=%d numericClOrdIDs=%v oddUnits=%v", k.ExecutionsPerFill, k.NumericClOrdIDs, k.OddUnits)
}

// venueArgs are the cmd/fixvenue flags that switch the knobs on. OddUnits is no flag: it is a
// fault the soak plays now and then (oddUnitsSchedule), so that most orders still fill.
func (k fixVenueKnobs) venueArgs() []string {
	own := fixvenue.OwnPrefixed
	if k.NumericClOrdIDs {
		own = fixvenue.OwnNumeric
	}
	return []string{"-executions", strconv.Itoa(k.ExecutionsPerFill), "-own-clordids", own}
}

// fixLane is the FIX venue process, its session file, and what the soak injected through it.
type fixLane struct {
	*sim
	addr    string // where the desk's session connects
	session string // the session file both web processes are given

	mu  sync.Mutex
	ran map[string]int // control → times used
}

// startFIXVenue runs fxdesk-fixvenue priced from feed, executing as knobs say, and writes the
// desk's session file.
func startFIXVenue(dir, binDir string, feed *sim, knobs fixVenueKnobs) (*fixLane, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	control, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-addr", addr, "-control-addr", control, "-latency", venueLatency.String(), "-feed-control", feed.control}, knobs.venueArgs()...)
	s, line, err := startSim(dir, binDir, "fixvenue", "fxdesk-fixvenue", args...)
	if err != nil {
		return nil, err
	}
	at, ctl, sender, target, err := fixvenue.ParseListening(line)
	if err != nil {
		s.stop()
		return nil, err
	}
	host, port, err := net.SplitHostPort(at)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.url, s.control = at, ctl
	v := &fixLane{sim: s, addr: at, session: filepath.Join(dir, "fix-session.cfg"), ran: map[string]int{}}
	cfg := fmt.Sprintf("# The soak's FIX session (docs/soak.md, «The FIX lane»).\n[DEFAULT]\nConnectionType=initiator\nReconnectInterval=1\nHeartBtInt=%d\n\n"+
		"[SESSION]\nBeginString=FIX.4.4\nSenderCompID=%s\nTargetCompID=%s\nSocketConnectHost=%s\nSocketConnectPort=%s\n",
		fixHeartbeat, sender, target, host, port)
	if err := os.WriteFile(v.session, []byte(cfg), 0o600); err != nil {
		s.stop()
		return nil, err
	}
	return v, nil
}

func (v *fixLane) lane() string { return invariant.LaneFIX }

func (v *fixLane) describe() string {
	return fmt.Sprintf("venue fix %s (cmd/fixvenue; control %s, session file %s)", v.addr, v.control, v.session)
}

// deskEnv is a web process's venue configuration: the one session file, the soak's short
// timings.
func (v *fixLane) deskEnv() []string {
	return []string{
		"FXDESK_VENUE=fix",
		"FXDESK_FIX_SESSION=" + v.session,
		"FXDESK_VENUE_ACCOUNT=" + venueAccount,
		"FXDESK_VENUE_CONCURRENCY=64",
		"FXDESK_VENUE_TIMEOUT=" + venueTimeout.String(),
		"FXDESK_VENUE_NOT_SENT_AFTER=" + venueNotSentAfter.String(),
		"FXDESK_VENUE_INTERVAL=" + venueInterval.String(),
		"FXDESK_HEDGE_INTERVAL=" + hedgeInterval.String(),
	}
}

// fixSides and fixStatuses spell FIX's Side and OrdStatus as the desk does.
var (
	fixSides    = map[string]string{"1": "BUY", "2": "SELL"}
	fixStatuses = map[string]string{"0": "NEW", "1": "PARTIAL", "2": "FILLED", "4": "CANCELED", "8": "REJECTED"}
)

// state reads GET /control/state as the checks read a venue: its orders, its net per symbol,
// and per ClOrdID the NewOrderSingle messages that carried it (a resend keeps its number).
func (v *fixLane) state() (*invariant.VenueState, error) {
	resp, err := httpClient.Get(v.control + "/control/state")
	if err != nil {
		return nil, fmt.Errorf("fix venue state: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("fix venue state: status %d", resp.StatusCode)
	}
	var st fixvenue.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("fix venue state: %w", err)
	}
	return fixVenueState(st, time.Now()), nil
}

// fixVenueState converts the FIX venue's state read at at. The venue's own orders are those it
// says it made (Order.Own), whatever their ClOrdID: a number, one equal to a desk order id, or
// none; they are no request of the desk's.
func fixVenueState(st fixvenue.State, at time.Time) *invariant.VenueState {
	vs := &invariant.VenueState{Lane: invariant.LaneFIX, At: at, Held: len(st.Held), OutageUntil: st.DownUntil,
		OrderRequests: map[string]int{}, RefusedAsDuplicate: map[string]int{}, Net: map[string]decimal.Decimal{}}
	for _, o := range st.Orders {
		if !o.Own {
			vs.OrderRequests[o.ClOrdID] = len(o.SeqNums)
			if o.DuplicatesRefused > 0 {
				vs.RefusedAsDuplicate[o.ClOrdID] = o.DuplicatesRefused
			}
		}
		status := fixStatuses[o.Status]
		if status == "CANCELED" && o.CumQty.IsPositive() {
			// An IOC's part (docs/orders.md, «IOC and FOK»): what executed is final, the rest
			// was cancelled — a fill of CumQty, as the checks read one.
			status = "FILLED"
		}
		if status == "" {
			status = "OrdStatus=" + o.Status
		}
		vo := invariant.VenueOrder{ClOrdID: o.ClOrdID, OrderID: o.OrderID, Own: o.Own, Symbol: o.Symbol, Side: fixSides[o.Side], Status: status,
			Qty: o.Qty, CumQty: o.CumQty, AvgPx: o.AvgPx}
		for _, e := range o.Executions {
			vo.Executions = append(vo.Executions, invariant.VenueExecution{ExecID: e.ExecID, Qty: e.Qty, Px: e.Px})
		}
		vs.Orders = append(vs.Orders, vo)
	}
	for _, p := range st.Positions {
		if !p.Units.IsZero() {
			vs.Net[p.Symbol] = p.Units
		}
	}
	return vs
}

func (v *fixLane) endState(context.Context) (*invariant.VenueState, error) { return v.state() }

func (v *fixLane) release() (int, error) {
	var out struct {
		Released int `json:"released"`
	}
	err := controlPost(v.control, "/control/release", struct{}{}, &out)
	return out.Released, err
}

func (v *fixLane) used(control string) {
	v.mu.Lock()
	v.ran[control]++
	v.mu.Unlock()
}

func (v *fixLane) controls() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []string
	for _, k := range fixControls {
		out = append(out, fmt.Sprintf("%s:%d", k, v.ran[k]))
	}
	return "fix={" + strings.Join(out, ",") + "}"
}

// holdFor holds the next count reports for d, then releases them.
func (v *fixLane) holdFor(ctx context.Context, count int, d time.Duration) (int, error) {
	if err := controlPost(v.control, "/control/fault", map[string]any{"kind": fixHold, "count": count}, nil); err != nil {
		return 0, err
	}
	v.used(fixHold)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	n, err := v.release()
	if err != nil {
		err = fmt.Errorf("release: %w", err)
	}
	return n, err
}

// inject plays one soak venue fault with the FIX venue's controls and says what it did.
func (v *fixLane) inject(ctx context.Context, f fault) (string, error) {
	switch f.Kind {
	case faultVenueTimeout:
		if f.Count%2 == 0 {
			// The REST timeout's answer never comes; a FIX report lost after execution is that.
			if err := controlPost(v.control, "/control/fault", map[string]any{"kind": fixLose, "count": f.Count}, nil); err != nil {
				return "", err
			}
			v.used(fixLose)
			return fmt.Sprintf("fix lose: the next %d orders execute, their reports never sent", f.Count), nil
		}
		// Held past the desk's venue timeout (504), then delivered late.
		n, err := v.holdFor(ctx, f.Count, f.HoldFor)
		return fmt.Sprintf("fix hold: the next %d orders' reports held %s (past the timeout), %d released", f.Count, f.HoldFor, n), err
	case faultVenueHold:
		n, err := v.holdFor(ctx, f.Count, f.HoldFor)
		return fmt.Sprintf("fix hold: the next %d orders' reports held %s, %d released", f.Count, f.HoldFor, n), err
	case faultVenue5xx:
		if err := controlPost(v.control, "/control/fault", map[string]any{"kind": fixReject, "count": f.Count,
			"reason": fixvenue.RejectExceedsLimit, "text": "soak: the venue refuses"}, nil); err != nil {
			return "", err
		}
		v.used(fixReject)
		return fmt.Sprintf("fix reject: the next %d orders rejected (OrdRejReason 3)", f.Count), nil
	case faultVenueOutage:
		var out struct {
			Dropped int `json:"dropped"`
		}
		if err := controlPost(v.control, "/control/drop", map[string]any{"seconds": f.DownFor.Seconds()}, &out); err != nil {
			return "", err
		}
		v.used(fixDrop)
		select {
		case <-ctx.Done():
		case <-time.After(f.DownFor):
		}
		return fmt.Sprintf("fix drop: %d session connections cut, reconnects refused for %s", out.Dropped, f.DownFor), nil
	case faultVenueOddUnits:
		return v.injectOddUnits(f)
	case faultVenueClose:
		vs, err := v.state()
		if err != nil {
			return "", err
		}
		symbols := make([]string, 0, len(vs.Net))
		for sym := range vs.Net {
			symbols = append(symbols, sym)
		}
		slices.Sort(symbols)
		if len(symbols) == 0 {
			return "fix close: the venue is flat, nothing to close", nil
		}
		sym := symbols[min(len(symbols)-1, int(f.Pick*float64(len(symbols))))]
		var o fixvenue.Order
		// A close the desk sends meanwhile may flatten the symbol first: not a fault.
		if err := controlPost(v.control, "/control/close", map[string]any{"symbol": sym}, &o); err != nil {
			if strings.Contains(err.Error(), "409") {
				return fmt.Sprintf("fix close: %s went flat before the venue closed it", sym), nil
			}
			return "", fmt.Errorf("close %s: %w", sym, err)
		}
		v.used(fixClose)
		return fmt.Sprintf("fix close: the venue closed its net %s %s (%s %s units at %s)", sym, vs.Net[sym], o.ClOrdID, o.Qty, o.AvgPx), nil
	}
	return "", fmt.Errorf("not a venue fault")
}

// watchDropMsg is what a web process logs when a close of an EXTERNAL position finds the venue no
// longer holding its trade (internal/trading, closeExternal): the risk engine stops watching the
// position there, until the reconciler books the venue's close.
const watchDropMsg = "venue has no open trade for an EXTERNAL position; the reconciler books its close"

// watchDrops reads every web process's log for the moments it was told the venue no longer held
// a position's trade (venueWatched).
func watchDrops(c *cluster) []invariant.WatchDrop {
	var out []invariant.WatchDrop
	for _, p := range c.all() {
		if p.kind != "web" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(c.dir, p.name+".log"))
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if !bytes.Contains(line, []byte(watchDropMsg)) {
				continue
			}
			var l struct {
				Time     time.Time `json:"time"`
				Msg      string    `json:"msg"`
				Position int64     `json:"position_id"`
			}
			if json.Unmarshal(line, &l) == nil && l.Msg == watchDropMsg {
				out = append(out, invariant.WatchDrop{Proc: p.name, At: l.Time, Position: l.Position})
			}
		}
	}
	return out
}
