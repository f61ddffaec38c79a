package fix_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"

	"github.com/shopspring/decimal"

	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// The reconciler's Plan reads a FIX venue as it reads the REST one: these build its VenueState
// from the FIX adapter the way the reconciler gathers it and check each case Plan repairs.

// gather reads the venue's state as the reconciler does (internal/execution, Reconciler.gather).
func gather(t *testing.T, s *fix.Session, d execution.DeskState) execution.VenueState {
	t.Helper()
	ctx := context.Background()
	sum, err := s.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trades, err := s.OpenTrades(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := execution.VenueState{AsOf: sum.LastTransactionID, OpenTrades: trades, Trades: map[string]venue.Trade{},
		ByClientID: map[string]execution.ClientLookup{}, Fills: map[int64]venue.Transaction{}}
	open, carried := map[string]venue.Trade{}, map[string]bool{}
	for _, tr := range trades {
		open[tr.ID] = tr
		if tr.Tag == venue.Tag {
			carried[tr.ClientID] = true
		}
	}
	wanted := map[int64]bool{}
	for _, p := range d.Positions {
		if tr, ok := open[p.TradeID]; ok && tr.CurrentUnits.Abs().Equal(p.Volume.Mul(d.ContractSize[p.Symbol])) {
			continue
		}
		full, found, err := s.TradeByID(ctx, p.TradeID)
		if err != nil {
			t.Fatal(err)
		}
		if found {
			v.Trades[p.TradeID] = full
			for _, id := range full.ClosingTransactionIDs {
				wanted[id] = true
			}
		}
	}
	if len(wanted) > 0 {
		txs, _, err := s.TransactionsSince(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range txs {
			if wanted[tx.ID] {
				v.Fills[tx.ID] = tx
			}
		}
	}
	for cid, o := range d.Orders {
		if o.Status != fx.OrderSending || carried[cid] {
			continue
		}
		var lk execution.ClientLookup
		if info, found, err := s.OrderByClientID(ctx, cid); err != nil {
			t.Fatal(err)
		} else if found {
			lk.Order = &info
		}
		if tr, found, err := s.TradeByClientID(ctx, cid); err != nil {
			t.Fatal(err)
		} else if found {
			lk.Trade = &tr
		}
		v.ByClientID[cid] = lk
	}
	return v
}

// planFor is the plan's actions on symbol (the journal is the whole test database's).
func planFor(t *testing.T, s *fix.Session, d execution.DeskState, symbol string) []execution.Action {
	t.Helper()
	var out []execution.Action
	for _, a := range execution.Plan(gather(t, s, d), d, time.Now(), execution.Config{NotSentAfter: time.Minute}) {
		if a.Symbol == symbol {
			out = append(out, a)
		}
	}
	return out
}

func deskState(symbol string) execution.DeskState {
	return execution.DeskState{Orders: map[string]execution.DeskOrder{}, ContractSize: map[string]decimal.Decimal{symbol: dd("100000")}}
}

func place(t *testing.T, s *fix.Session, clOrdID, symbol, units string) venue.Fill {
	t.Helper()
	out, err := s.PlaceMarket(context.Background(), venue.MarketOrder{ClientID: clOrdID, Symbol: symbol, Units: dd(units)})
	if err != nil || out.Fill == nil {
		t.Fatalf("place %s: %+v %v", clOrdID, out, err)
	}
	return *out.Fill
}

// A SENDING order whose fill the venue holds is adopted (its trade, its price, its opening
// execution), never re-sent; one the venue never saw is marked NOT_SENT past the threshold.
func TestPlanOverFIXAdoptsByClOrdIDAndMarksUnknownNotSent(t *testing.T) {
	r := newRig(t, 5*time.Second)
	id := orderID()
	f := place(t, r.session, id, "NZDUSD", "20000")
	d := deskState("NZDUSD")
	oid, _ := strconv.ParseInt(id, 10, 64)
	d.Orders[id] = execution.DeskOrder{OrderID: oid, ClientID: id, Symbol: "NZDUSD", Side: fx.Buy, Volume: dd("0.2"), Status: fx.OrderSending, SentAt: time.Now()}
	lost := orderID()
	lid, _ := strconv.ParseInt(lost, 10, 64)
	d.Orders[lost] = execution.DeskOrder{OrderID: lid, ClientID: lost, Symbol: "NZDUSD", Side: fx.Buy, Volume: dd("0.1"), Status: fx.OrderSending, SentAt: time.Now().Add(-time.Hour)}
	acts := planFor(t, r.session, d, "NZDUSD")
	if len(acts) != 2 || acts[0].Kind != execution.Adopt || acts[0].OrderID != oid || acts[0].TradeID != f.TradeOpened ||
		!acts[0].Price.Equal(dd("0.6002")) || acts[0].TransactionID != f.TransactionID || !acts[0].Volume.Equal(dd("0.2")) ||
		acts[1].Kind != execution.MarkNotSent || acts[1].OrderID != lid {
		t.Fatalf("plan %+v; want Adopt of %s at 0.6002 (execution %d) and MarkNotSent of %s", acts, f.TradeOpened, f.TransactionID, lost)
	}
	if n := countOrders(r.venue, lost); n != 0 {
		t.Fatalf("the venue saw the NOT_SENT order %d times", n)
	}
}

// A tagged trade no open desk position explains is an orphan: Plan closes it, the close is an
// opposite order against the venue's net, and the next plan has nothing left to do.
func TestPlanOverFIXClosesAnOrphan(t *testing.T) {
	r := newRig(t, 5*time.Second)
	id := orderID()
	f := place(t, r.session, id, "USDCHF", "-30000")
	d := deskState("USDCHF")
	oid, _ := strconv.ParseInt(id, 10, 64)
	d.Orders[id] = execution.DeskOrder{OrderID: oid, ClientID: id, Symbol: "USDCHF", Side: fx.Sell, Volume: dd("0.3"), Status: fx.OrderFilled, PositionID: 99, PositionOpen: false}
	acts := planFor(t, r.session, d, "USDCHF")
	if len(acts) != 1 || acts[0].Kind != execution.CloseOrphan || acts[0].TradeID != f.TradeOpened {
		t.Fatalf("plan %+v; want CloseOrphan of %s", acts, f.TradeOpened)
	}
	out, err := fix.Sender{S: r.session}.CloseTrade(context.Background(), acts[0].TradeID, acts[0].Units, time.Time{})
	if err != nil || out.Fill == nil || !out.Fill.Units.Equal(dd("30000")) || !out.Fill.Price.Equal(dd("0.9002")) {
		t.Fatalf("orphan close: %+v %v; want 30000 bought back at the ask 0.9002", out.Fill, err)
	}
	if u, _ := r.venue.NetPosition("USDCHF"); !u.IsZero() {
		t.Fatalf("venue net %s after the orphan close", u)
	}
	if acts := planFor(t, r.session, d, "USDCHF"); len(acts) != 0 {
		t.Fatalf("plan after the close: %+v; want nothing", acts)
	}
}

// The venue closes part of a desk trade, then the rest: Plan books the unbooked partial at that
// execution's price, then closes the desk side at the last one's.
func TestPlanOverFIXBooksAVenuePartialThenTheVenuesClose(t *testing.T) {
	r := newRig(t, 5*time.Second)
	id := orderID()
	f := place(t, r.session, id, "USDCAD", "10000")
	oid, _ := strconv.ParseInt(id, 10, 64)
	d := deskState("USDCAD")
	d.Positions = []execution.DeskPosition{{PositionID: 7, OrderID: oid, AccountID: 1, Symbol: "USDCAD", Side: fx.Buy, Volume: dd("0.1"), TradeID: f.TradeOpened}}
	if acts := planFor(t, r.session, d, "USDCAD"); len(acts) != 0 {
		t.Fatalf("plan with the desk in line: %+v", acts)
	}
	part := dd("4000")
	if _, err := r.venue.CloseVenueSide("USDCAD", &part); err != nil {
		t.Fatal(err)
	}
	var acts []execution.Action
	eventually(t, func() bool { acts = planFor(t, r.session, d, "USDCAD"); return len(acts) > 0 })
	if len(acts) != 1 || acts[0].Kind != execution.BookPartial || acts[0].PositionID != 7 || !acts[0].Volume.Equal(dd("0.04")) || !acts[0].Price.Equal(dd("1.35")) {
		t.Fatalf("plan after the venue's partial: %+v; want BookPartial of 0.04 at the bid 1.35", acts)
	}
	// Booked: the desk holds 0.06 and the fill.
	d.Positions[0].Volume, d.Positions[0].Booked = dd("0.06"), []int64{acts[0].TransactionID}
	if _, err := r.venue.CloseVenueSide("USDCAD", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { acts = planFor(t, r.session, d, "USDCAD"); return len(acts) > 0 })
	if len(acts) != 1 || acts[0].Kind != execution.CloseDeskSide || !acts[0].Volume.Equal(dd("0.06")) || !acts[0].Price.Equal(dd("1.35")) {
		t.Fatalf("plan after the venue's close: %+v; want CloseDeskSide of 0.06 at 1.35", acts)
	}
}

// eventually polls cond for up to 5 s: an unsolicited report is journaled when it arrives.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	poll.Until(t, 5*time.Second, 20*time.Millisecond, "the condition", cond)
}
