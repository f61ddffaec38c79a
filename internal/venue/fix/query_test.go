package fix_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
)

// queryTimeout is the production default (FXDESK_VENUE_TIMEOUT): a patience of 2 s.
const queryTimeout = 10 * time.Second

// asksAgain records the session's "asking again" lines.
type asksAgain struct {
	mu    sync.Mutex
	lines []map[string]string
}

func (h *asksAgain) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *asksAgain) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "FIX query unanswered; asking again" || r.Level != slog.LevelInfo {
		return nil
	}
	line := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { line[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}
func (h *asksAgain) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *asksAgain) WithGroup(string) slog.Handler      { return h }

func (h *asksAgain) list() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), h.lines...)
}

// queryRig is a rig whose session runs with the default timeout and logs its asks to h.
func queryRig(t *testing.T) (*rig, *asksAgain) {
	t.Helper()
	r := newRig(t, queryTimeout)
	r.halt()
	h := &asksAgain{}
	r.log = slog.New(h)
	r.start(t, queryTimeout)
	return r, h
}

// A status request the venue never answers (as one gap-filled in a takeover's resend) is asked
// again after the patience, with the same ClOrdID, and the second answer resolves the order:
// the lookup returns the fill instead of waiting out FXDESK_VENUE_TIMEOUT. The order itself is
// never sent again.
func TestUnansweredOrderStatusIsAskedAgain(t *testing.T) {
	r, asks := queryRig(t)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	id := orderID()
	// The report is lost: the send gives up at its own deadline, the order stays unanswered.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "USDCAD", Units: dd("3000")})
	cancel()
	if !errors.Is(err, venue.ErrOutcomeUnknown) || countOrders(r.venue, id) != 1 {
		t.Fatalf("want the lost report's outcome unknown and the order at the venue: %v, %d orders", err, countOrders(r.venue, id))
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultIgnore}); err != nil {
		t.Fatal(err)
	}
	info, found, err := r.session.OrderByClientID(context.Background(), id)
	if err != nil || !found || info.State != venue.OrderFilled || info.TradeOpenedID == "" {
		t.Fatalf("lookup: %+v found=%v err=%v", info, found, err)
	}
	q := r.venue.State().Queries
	if q.OrderStatus != 2 || q.Ignored != 1 {
		t.Fatalf("the venue saw %+v; want 2 status requests, the first ignored", q)
	}
	lines := asks.list()
	if len(lines) != 1 || lines[0]["query"] != "order status" || lines[0]["clOrdId"] != id || lines[0]["ask"] != "2" {
		t.Fatalf("asked-again lines %v; want one, the second ask of order status %s", lines, id)
	}
	if n := countOrders(r.venue, id); n != 1 {
		t.Fatalf("the venue holds %d orders %s, want exactly 1: an order is never sent again", n, id)
	}
	var execs int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_execution` WHERE `clOrdId` = ?", id).Scan(&execs); err != nil || execs != 1 {
		t.Fatalf("the fill journaled %d times (%v), want once", execs, err)
	}
}

// A position request and a mass status the venue never answers are asked again, each under a
// new request id, and the answer to the second ask is the answer.
func TestUnansweredPositionAndMassStatusRequestsAreAskedAgain(t *testing.T) {
	r, asks := queryRig(t)
	ctx := context.Background()
	if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: orderID(), Symbol: "NZDUSD", Units: dd("-4000")}); err != nil {
		t.Fatal(err)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultIgnore}); err != nil {
		t.Fatal(err)
	}
	net, err := r.session.Positions(ctx)
	if err != nil {
		t.Fatalf("positions: %v", err)
	}
	if want, _ := r.venue.NetPosition("NZDUSD"); !net["NZDUSD"].Equal(want) || !want.Equal(dd("-4000")) {
		t.Fatalf("positions %v; the venue's NZDUSD net is %s, want -4000", net, want)
	}
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultIgnore}); err != nil {
		t.Fatal(err)
	}
	n, err := r.session.MassStatus(ctx)
	if err != nil || n != len(r.venue.State().Orders) {
		t.Fatalf("mass status: %d orders, %v; the venue holds %d", n, err, len(r.venue.State().Orders))
	}
	q := r.venue.State().Queries
	if q.Positions != 2 || q.MassStatus != 2 || q.Ignored != 2 {
		t.Fatalf("the venue saw %+v; want 2 position and 2 mass status requests, one of each ignored", q)
	}
	lines := asks.list()
	if len(lines) != 2 || lines[0]["query"] != "request for positions" || lines[1]["query"] != "mass status" || lines[0]["ask"] != "2" || lines[1]["ask"] != "2" {
		t.Fatalf("asked-again lines %v; want the second ask of each", lines)
	}
}

// A query nobody answers is asked each patience while a whole patience is left, and fails at
// its timeout saying how often it asked.
func TestQueryNeverAnsweredFailsAtItsTimeout(t *testing.T) {
	r := newRig(t, 2500*time.Millisecond) // a patience of 1 s: asks at 0 and 1 s (2 s leaves less than 1 s)
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultIgnore, Count: 10}); err != nil {
		t.Fatal(err)
	}
	_, err := r.session.Positions(context.Background())
	if !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("want ErrOutcomeUnknown, got %v", err)
	}
	if q := r.venue.State().Queries; q.Positions != 2 || q.Ignored != 2 {
		t.Fatalf("the venue saw %+v; want 2 position requests, both ignored (%v)", q, err)
	}
}
