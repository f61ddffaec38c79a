package fix_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// A venue that reports each position with several NoPositions entries (TQ, then SOD) is read per
// entry by PosType: the net is the TQ entry's, never the last entry's (an SOD of 0 would read as
// flat, and the desk's trades as a remainder the venue does not hold).
func TestPositionReportsAreReadPerEntry(t *testing.T) {
	r := newRigWith(t, 2*time.Second, func(c *fixvenue.Config) { c.PositionReports = fixvenue.PositionsTQSOD })
	k := open(t, r, "GBPCHF", "10000")
	net, err := r.session.Positions(context.Background())
	if err != nil || !net["GBPCHF"].Equal(dd("10000")) {
		t.Fatalf("positions %v %v; want GBPCHF 10000 (the TQ entry)", net, err)
	}
	waitTrades(t, r, "GBPCHF", map[string]string{k: "10000"})
}

// A venue that reports each position type in a report of its own (a TQ report and an SOD report
// per symbol) sends more reports than symbols: the answer is complete on the reports' own count
// (TotalNumPosReports), not on the symbols seen.
func TestPositionAnswersCompleteOnTheReportCount(t *testing.T) {
	r := newRigWith(t, 2*time.Second, func(c *fixvenue.Config) { c.PositionReports = fixvenue.PositionsSplit })
	open(t, r, "EURAUD", "10000")
	net, err := r.session.Positions(context.Background())
	if err != nil || len(net) != 1 || !net["EURAUD"].Equal(dd("10000")) {
		t.Fatalf("positions %v %v; want EURAUD 10000", net, err)
	}
}

// A venue that enforces the Parties component FIX 4.4 marks required on RequestForPositions
// (rejecting a request without it) answers the desk's.
func TestPositionRequestsCarryParties(t *testing.T) {
	r := newRigWith(t, 2*time.Second, func(c *fixvenue.Config) { c.RequireParties = true })
	net, err := r.session.Positions(context.Background())
	if err != nil || len(net) != 0 {
		t.Fatalf("positions %v %v; want an empty answer from a venue that requires Parties", net, err)
	}
}

// A venue that refuses the desk's position request (RequestForPositionsAck PosReqStatus=2) is
// answered at once as an error — not asked again, not an unknown outcome at the timeout — and
// raised as venue-query-refused; the next answer resolves the alert.
func TestARefusedPositionRequestIsAnErrorAndAnAlert(t *testing.T) {
	r := newRig(t, 2*time.Second)
	r.halt()
	inbox := alert.NewInbox(testDB, slog.New(slog.DiscardHandler))
	r.alerts = inbox
	r.start(t, 2*time.Second)
	ctx := context.Background()
	if err := r.venue.InjectFault(fixvenue.Fault{Kind: fixvenue.FaultRefuse, Reason: 3, Text: "not authorized for positions"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.session.Positions(ctx)
	if err == nil || errors.Is(err, venue.ErrOutcomeUnknown) {
		t.Fatalf("a refused request: err %v; want the venue's refusal, not an unknown outcome", err)
	}
	if q := r.venue.State().Queries; q.Positions != 1 {
		t.Fatalf("the venue was asked %d times; a refusal is an answer, never asked again", q.Positions)
	}
	if n := openAlerts(t, inbox); n != 1 {
		t.Fatalf("%d open %s alerts after the refusal, want 1", n, fix.AlertQueryRefused)
	}
	if _, err := r.session.Positions(ctx); err != nil {
		t.Fatal(err)
	}
	if n := openAlerts(t, inbox); n != 0 {
		t.Fatalf("%d open %s alerts after an answer, want 0", n, fix.AlertQueryRefused)
	}
}

func openAlerts(t *testing.T, in *alert.Inbox) int {
	t.Helper()
	as, err := in.List(context.Background(), alert.Filter{Statuses: []alert.Status{alert.Open}, Code: fix.AlertQueryRefused})
	if err != nil {
		t.Fatal(err)
	}
	return len(as)
}
