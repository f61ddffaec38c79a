package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fixMDState is the market-data part of the bundled venue's GET /control/state.
type fixMDState struct {
	MarketData struct {
		LoggedOn      bool     `json:"loggedOn"`
		Subscriptions []string `json:"subscriptions"`
		Rejected      int      `json:"rejected"`
		Snapshots     int      `json:"snapshots"`
		Incrementals  int      `json:"incrementals"`
	} `json:"marketData"`
}

// The bundled FIX venue's market data against a C++ QuickFIX taker on the venue's market-data
// session (FXDESK-MD -> FXVENUE-MD, cmd/fixvenue's defaults; docs/fix.md «Market data»): a
// subscription gets a snapshot of the feed's price and then incrementals as the feed walks, each
// validated by that engine's FIX 4.4 data dictionary; an unsubscribe ends it; a symbol the venue
// does not list is refused with MDReqRejReason 0. No reject on either side.
func TestFIXConformanceMarketDataWithCQuickFIX(t *testing.T) {
	t.Parallel()
	fixPeerBinary(t) // skips before anything starts
	feed := startFeedSim(t, "-walk", "50ms")
	v := startFIXVenue(t, feed, "5ms")
	host, port, err := net.SplitHostPort(v.addr)
	if err != nil {
		t.Fatal(err)
	}
	peer := startFIXPeer(t, "initiator", "-sender", "FXDESK-MD", "-target", "FXVENUE-MD", "-host", host, "-port", port)
	peer.upTo("LOGON")

	const incrementals = 5
	peer.send("md EURUSD " + strconv.Itoa(incrementals))
	lines := peer.upTo("MD_OK")
	snap, ok := milestone(lines, "SNAPSHOT"), milestone(lines, "MD_OK")
	if snap["symbol"] != "EURUSD" || !dec(snap["bid"]).IsPositive() || dec(snap["ask"]).LessThan(dec(snap["bid"])) {
		t.Fatalf("snapshot %v; want EURUSD's bid and ask", snap)
	}
	if n, _ := strconv.Atoi(ok["incrementals"]); ok["snapshots"] != "1" || n < incrementals {
		t.Fatalf("market data %v (%q); want one snapshot and at least %d incrementals", ok, lines, incrementals)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "INCREMENTAL ") && !strings.Contains(l, "reqId="+ok["reqId"]) {
			t.Fatalf("incremental %q is not of the subscription %s", l, ok["reqId"])
		}
	}

	peer.send("md-unknown ABCXYZ")
	if rej := milestone(peer.upTo("MD_REJECT"), "MD_REJECT"); rej["reason"] != "0" || !strings.Contains(rej["text"], "unknown_symbol") {
		t.Fatalf("refusal %v; want MDReqRejReason 0 (unknown symbol)", rej)
	}

	// The unsubscribe ended the subscription at the venue (the peer's Heartbeat probe after it
	// came back, so the venue read it).
	st := controlState[fixMDState](t, v.control, "fixvenue").MarketData
	if !st.LoggedOn || len(st.Subscriptions) != 0 || st.Rejected != 1 || st.Snapshots != 1 || st.Incrementals < incrementals {
		t.Fatalf("venue market data %+v; want logged on, no subscription left, 1 refusal, 1 snapshot, >= %d incrementals", st, incrementals)
	}
	peer.quit()
	eventually(t, 10*time.Second, 20*time.Millisecond, "the venue saw the market-data session log out", func() bool {
		return !controlState[fixMDState](t, v.control, "fixvenue").MarketData.LoggedOn
	})
}
