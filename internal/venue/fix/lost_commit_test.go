package fix_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/testkit/tcpproxy"
	"fxdesk/internal/venue"
)

// The journal's COMMIT of an open's report succeeds and its reply is lost (the proxy drops the
// server's answer to it and cuts the connection): the desk cannot know the report is recorded,
// so the session reconnects, the venue resends the report, and the intake finds it already
// journaled and records nothing. The holder's memory must learn the trade from the journal
// then (docs/fix.md, «A report already journaled»): a close of it goes, instead of 404
// TRADE_DOESNT_EXIST while the venue holds it.
func TestAnOpenWhoseJournalCommitReplyWasLostIsLearnedFromTheResentReport(t *testing.T) {
	r, proxy := newRigViaProxy(t)
	logons := r.session.Logons()

	key := orderID()
	var mu sync.Mutex
	journaling := map[int]bool{} // connections in a transaction that journaled key's execution
	var lost atomic.Bool
	proxy.Tap(tcpproxy.MySQLConnQueries(func(conn int, q string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(q, "INSERT INTO `fx_fix_execution`") && strings.Contains(q, "'"+key+"'"):
			journaling[conn] = true
		case q == "COMMIT" && journaling[conn] && !lost.Load():
			lost.Store(true)
			proxy.LoseReply(conn)
		}
	}))

	ctx := context.Background()
	out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: key, Symbol: "HKDJPY", Units: dd("7000")})
	if !lost.Load() || !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("open whose journal commit lost its reply: %+v %v (reply lost: %v), want an unknown outcome", out, err, lost.Load())
	}
	// The reply was cut as the COMMIT went out, not after the server applied it: on a loaded
	// machine a read at once can come before the commit lands (CI: the journal still said
	// NEW, the lookup asked a session that was reconnecting). So the trade is asked for until
	// the commit shows; what it must show is unchanged.
	var tr venue.Trade
	var found bool
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the journal's trade "+key+" 7000 open (the commit succeeded)", func() bool {
		tr, found, err = r.session.TradeByClientID(ctx, key)
		return err == nil && found && tr.CurrentUnits.Equal(dd("7000"))
	})
	poll.Until(t, 15*time.Second, 10*time.Millisecond, "the session reconnected and the venue resent the report", func() bool {
		return r.session.Logons() > logons && r.session.Reachable()
	})
	poll.Until(t, 10*time.Second, 10*time.Millisecond, "the holder learns the trade from the resent report", func() bool {
		lt, ok := r.session.LiveTrades()[key]
		return ok && lt.Units.Equal(dd("7000")) && lt.ID > 0
	})
	c, err := r.session.CloseTrade(ctx, tr.ID, nil)
	if err != nil || c.Fill == nil || !c.Fill.Units.Equal(dd("-7000")) {
		t.Fatalf("close of the trade whose report's commit reply was lost: %+v %v; want 7000 sold", c, err)
	}
	if u, _ := r.venue.NetPosition("HKDJPY"); !u.IsZero() {
		t.Fatalf("venue net %s after the close, want 0", u)
	}
}

// A trade the journal holds open and the holder's memory does not (its report journaled by
// another process, and none comes here) is never answered 404 — which the desk reads as
// "closed at the venue", and stops watching the position: the close reads the journal, learns
// the trade and closes it.
func TestACloseOfATradeTheJournalHoldsOpenIsNeverRefusedNotFound(t *testing.T) {
	r := newRig(t, time.Second)
	ctx := context.Background()
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultLose}); err != nil {
		t.Fatal(err)
	}
	key := orderID()
	if out, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: key, Symbol: "AUDNZD", Units: dd("3000")}); !errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("open whose report is lost: %+v %v, want an unknown outcome", out, err)
	}
	var o fixvenue.Order
	for _, vo := range r.venue.State().Orders {
		if vo.ClOrdID == key {
			o = vo
		}
	}
	journalElsewhere(t, r, o)
	if _, known := r.session.LiveTrades()[key]; known {
		t.Fatalf("the holder knows trade %s already; the test needs it unknown to memory", key)
	}
	tr, found, err := r.session.TradeByClientID(ctx, key)
	if err != nil || !found {
		t.Fatalf("the journal's trade %s: %v found=%v", key, err, found)
	}
	c, err := r.session.CloseTrade(ctx, tr.ID, nil)
	if err != nil || c.Fill == nil || !c.Fill.Units.Equal(dd("-3000")) {
		t.Fatalf("close of a trade the journal holds open: %+v %v; want 3000 sold, never 404", c, err)
	}
	if n := closeOrders(r.venue, key); n != 1 {
		t.Fatalf("the venue received %d closes of %s, want 1", n, key)
	}
}
