package invariant

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

func priceSnapshot() *Snapshot {
	return &Snapshot{Taken: t0.Add(10 * time.Minute), Instruments: map[string]dbInstrument{
		"EURUSD": {Point: decimal.RequireFromString("0.00001")}, "USDJPY": {Point: decimal.RequireFromString("0.001")}},
		Candles: map[string]dbCandle{}, CandlesRead: true}
}

func deal(id int64, symbol, price string, at time.Time, position int64) dbDeal {
	return dbDeal{ID: id, Account: 1, Type: "CLOSE", Symbol: sql.NullString{String: symbol, Valid: true},
		Price: decimal.NullDecimal{Decimal: decimal.RequireFromString(price), Valid: true}, CreatedAt: at,
		Position: sql.NullInt64{Int64: position, Valid: position > 0}}
}

// A close at the price of a tick the desk dropped (or of a spike the soak injected) fails
// filteredNotActed; one at the market passes; a venue's fill at its own primary feed's spike, and a
// deal in a gap's window, are excused.
func TestFilteredNotActedFailsADealAtADroppedTickOrASpike(t *testing.T) {
	ev := &Evidence{Prices: &PriceEvidence{
		Filtered: []FilteredTick{{Symbol: "EURUSD", Source: SourcePrimary, Bid: 1.11000, Ask: 1.11002, ReceivedAt: t0, Reason: "spike", Outcome: "dropped", DecidedAt: t0.Add(300 * time.Millisecond)},
			{Symbol: "EURUSD", Source: SourceBackup, Bid: 1.09000, Ask: 1.09002, ReceivedAt: t0, Reason: "spike", Outcome: "published-after-confirm"}},
		Faults: []PriceFault{{Kind: PriceSpike, Sources: []string{SourceBackup}, Symbol: "USDJPY", Start: t0, End: t0.Add(50 * time.Millisecond), Ref: 150, Price: 153, Pips: 300},
			{Kind: PriceGap, Symbol: "GBPUSD", Start: t0, End: t0.Add(time.Second)},
			{Kind: PriceOffset, Sources: []string{SourcePrimary}, Start: t0.Add(-time.Second), End: t0.Add(time.Second), Pips: 300}},
	}}
	s := priceSnapshot()
	s.Deals = []dbDeal{deal(1, "EURUSD", "1.08105", t0.Add(time.Second), 0), deal(2, "EURUSD", "1.09001", t0.Add(time.Second), 0)}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 0 {
		t.Fatalf("deals at the market and at a published-after-confirm tick: %v", r.Violations)
	}
	s.Deals = append(s.Deals, deal(3, "EURUSD", "1.11003", t0.Add(2*time.Second), 0), deal(4, "USDJPY", "153.020", t0.Add(time.Second), 0),
		deal(5, "GBPUSD", "1.30000", t0.Add(time.Second), 0))
	r := checkFilteredNotActed(s, ev)
	if len(r.Violations) != 2 || !strings.Contains(r.Violations[0].Text, "deal 3") || !strings.Contains(r.Violations[1].Text, "deal 4") {
		t.Fatalf("want deals 3 (dropped tick) and 4 (spike) broken, got %v", r.Violations)
	}
	// A venue's fill is judged alike: the venue prices from a market feed the lane never faults.
	s.Orders = []dbOrder{{ID: 7, Execution: "EXTERNAL"}}
	s.Positions = []dbPosition{{ID: 70, Order: 7}}
	s.Deals = []dbDeal{deal(6, "EURUSD", "1.11001", t0.Add(time.Second), 70)}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 1 {
		t.Fatalf("a venue fill at the primary's dropped tick: %v %s", r.Violations, r.Figures)
	}
	// A dropped tick that stood at the published prices is no filtered price: a deal beside it is
	// the market's.
	ev.Prices.Published = []PublishedTick{{Symbol: "EURUSD", Bid: 1.11001, Ask: 1.11003, At: t0.Add(500 * time.Millisecond)}}
	s.Deals = []dbDeal{deal(8, "EURUSD", "1.11003", t0.Add(time.Second), 0)}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 0 || !strings.Contains(r.Figures, "1 more stood at them") {
		t.Fatalf("a deal at a published price beside a dropped tick: %v %s", r.Violations, r.Figures)
	}
	// A deal long after a dropped off-market tick, at a price the market walked to since: the
	// prices published just before the deal explain it.
	ev.Prices.Published = []PublishedTick{{Symbol: "EURUSD", Bid: 1.08, Ask: 1.08002, At: t0},
		{Symbol: "EURUSD", Bid: 1.11002, Ask: 1.11004, At: t0.Add(19 * time.Second)}}
	s.Deals = []dbDeal{deal(10, "EURUSD", "1.11003", t0.Add(20*time.Second), 0)}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 0 || !strings.Contains(r.Figures, "1 as near a price published") {
		t.Fatalf("a deal at the market the price walked to: %v %s", r.Violations, r.Figures)
	}
	// An injected spike is judged even where the desk published it: that is the defect.
	ev.Prices.Published = append(ev.Prices.Published, PublishedTick{Symbol: "USDJPY", Bid: 153.0, Ask: 153.02, At: t0.Add(10 * time.Millisecond)})
	s.Deals = []dbDeal{deal(4, "USDJPY", "153.020", t0.Add(time.Second), 0)}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 1 {
		t.Fatalf("a deal at a spike the desk published: %v %s", r.Violations, r.Figures)
	}
	ev.Prices.Published = nil
	s.Deals = nil
	// A hedge fill at it, long after the spike, is not.
	s.HedgeFills = []dbHedgeFill{{ID: 9, Symbol: "EURUSD", Price: decimal.RequireFromString("1.11"), At: t0.Add(20 * time.Second)}}
	if r := checkFilteredNotActed(s, ev); len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, "hedge order 9") {
		t.Fatalf("a hedge fill at a dropped price 20 s later: %v", r.Violations)
	}
}

// A dropped tick from a source no price fault moved is the market's, even where the desk
// published nothing beside it: the deals near it are not at a filtered price. A dropped tick of
// the offset source is still one. Seed 653824426413480: a new holder took over during the
// backup's -126-pip offset, published nothing for 7 s (its sources had never agreed) and dropped
// the primary's market ticks as disagreeing; 28 deals at the market beside them failed the run.
func TestFilteredNotActedTakesAnUnmovedSourcesDroppedTickForTheMarket(t *testing.T) {
	offsetEnd := t0.Add(5 * time.Second)
	ev := &Evidence{Prices: &PriceEvidence{
		Faults: []PriceFault{{Kind: PriceOffset, Sources: []string{SourceBackup}, Start: t0, End: offsetEnd, Pips: -126}},
		// The old holder's last price, before the takeover; the new one publishes from t0+9s.
		Published: []PublishedTick{{Symbol: "EURUSD", Source: SourceBackup, Bid: 1.16064, Ask: 1.16070, At: t0.Add(-4 * time.Second)},
			{Symbol: "EURUSD", Source: SourceBackup, Bid: 1.16040, Ask: 1.16046, At: t0.Add(30 * time.Second)}},
		Filtered: []FilteredTick{
			{Symbol: "EURUSD", Source: SourcePrimary, Bid: 1.16101, Ask: 1.16107, ReceivedAt: t0.Add(1800 * time.Millisecond), Reason: "disagrees", Outcome: "dropped", DecidedAt: t0.Add(2100 * time.Millisecond)},
			{Symbol: "EURUSD", Source: SourcePrimary, Bid: 1.16063, Ask: 1.16069, ReceivedAt: t0.Add(3600 * time.Millisecond), Reason: "disagrees", Outcome: "dropped", DecidedAt: t0.Add(3600 * time.Millisecond)}},
	}}
	s := priceSnapshot()
	s.Orders = []dbOrder{{ID: 7, Execution: "EXTERNAL"}}
	s.Positions = []dbPosition{{ID: 70, Order: 7}}
	s.Deals = []dbDeal{
		deal(1, "EURUSD", "1.16098", t0.Add(2200*time.Millisecond), 70), // the venue's close, at the market
		deal(2, "EURUSD", "1.16064", t0.Add(2300*time.Millisecond), 0),  // a close-by, at a leg's open price
		deal(3, "EURUSD", "1.16063", t0.Add(31*time.Second), 0),         // a fill once the market walked back
	}
	r := checkFilteredNotActed(s, ev)
	if len(r.Violations) != 0 || !strings.Contains(r.Figures, "2 from a source no price fault moved") {
		t.Fatalf("deals at the market beside the unmoved primary's dropped ticks: %v %s", r.Violations, r.Figures)
	}
	// The offset backup's own dropped tick is a filtered price: a deal at it is the defect.
	ev.Prices.Filtered = append(ev.Prices.Filtered, FilteredTick{Symbol: "EURUSD", Source: SourceBackup, Bid: 1.14841, Ask: 1.14847,
		ReceivedAt: t0.Add(2 * time.Second), Reason: "disagrees", Outcome: "dropped", DecidedAt: t0.Add(2 * time.Second)})
	s.Deals = append(s.Deals, deal(4, "EURUSD", "1.14845", t0.Add(2500*time.Millisecond), 0))
	r = checkFilteredNotActed(s, ev)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, "deal 4") {
		t.Fatalf("want deal 4, at the offset backup's dropped tick, broken: %v %s", r.Violations, r.Figures)
	}
	// So is its tick read from a woken holder's backlog, stamped after the offset ended.
	ev.Prices.Filtered[2].ReceivedAt, ev.Prices.Filtered[2].DecidedAt = offsetEnd.Add(6*time.Second), offsetEnd.Add(6*time.Second)
	s.Deals[3].CreatedAt = offsetEnd.Add(6500 * time.Millisecond)
	r = checkFilteredNotActed(s, ev)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, "deal 4") {
		t.Fatalf("want deal 4, at a backlog tick of the offset, broken: %v %s", r.Violations, r.Figures)
	}
}

func selection(at time.Time, symbol, source string, silentAfter time.Duration) SelectionSample {
	return SelectionSample{PID: 1, Sent: at, Recv: at.Add(20 * time.Millisecond), Symbol: symbol, Source: source,
		Health: []SourceHealthSample{{Source: SourcePrimary, SilentAfter: silentAfter}, {Source: SourceBackup, Healthy: true}}}
}

// A symbol still quoted from a silent primary past its threshold and the tolerance, while the
// backup was untouched, fails silentNotQuoted; before the threshold, or with the backup silent
// too, it does not.
func TestSilentNotQuotedFailsTheSilentPrimaryPastItsThreshold(t *testing.T) {
	pe := &PriceEvidence{Faults: []PriceFault{{Kind: PricePrimarySilent, Sources: []string{SourcePrimary}, Start: t0, End: t0.Add(6 * time.Second)}}}
	pe.Selections = []SelectionSample{selection(t0.Add(-10*time.Second), "EURUSD", SourcePrimary, 3*time.Second),
		selection(t0.Add(2*time.Second), "EURUSD", SourcePrimary, 3*time.Second),
		selection(t0.Add(3500*time.Millisecond), "EURUSD", SourceBackup, 3*time.Second)}
	if r := checkSilentNotQuoted(pe, nil); len(r.Violations) != 0 || !strings.Contains(r.Figures, "slowest failover seen 3.5s") {
		t.Fatalf("on the primary before its threshold, then the backup: %v %s", r.Violations, r.Figures)
	}
	pe.Selections = append(pe.Selections, selection(t0.Add(4500*time.Millisecond), "USDJPY", SourcePrimary, 3*time.Second))
	if r := checkSilentNotQuoted(pe, nil); len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, "USDJPY quoted from the primary") {
		t.Fatalf("USDJPY on the primary 4.5 s into a silence with a 3 s threshold: %v", r.Violations)
	}
	pe.Faults = append(pe.Faults, PriceFault{Kind: PriceBothSilent, Sources: []string{SourcePrimary, SourceBackup}, Start: t0.Add(4 * time.Second), End: t0.Add(5 * time.Second)})
	if r := checkSilentNotQuoted(pe, nil); len(r.Violations) != 0 {
		t.Fatalf("no source healthy: nothing to fail over to: %v", r.Violations)
	}
	// A primary whose sockets drop fails over at once: past the tolerance alone it is a violation.
	pe.Faults = []PriceFault{{Kind: PricePrimaryDown, Sources: []string{SourcePrimary}, Start: t0, End: t0.Add(3 * time.Second)}}
	pe.Selections = []SelectionSample{selection(t0.Add(-time.Second), "EURUSD", SourcePrimary, 3*time.Second),
		selection(t0.Add(1500*time.Millisecond), "EURUSD", SourcePrimary, 3*time.Second)}
	if r := checkSilentNotQuoted(pe, nil); len(r.Violations) != 1 {
		t.Fatalf("on a down primary 1.5 s in: %v", r.Violations)
	}
	// A holder that took over 0.5 s before has had no quote yet: it is not judged in its first 2 s.
	pe.Selections = []SelectionSample{selection(t0.Add(1000*time.Millisecond), "EURUSD", SourcePrimary, 3*time.Second),
		selection(t0.Add(2500*time.Millisecond), "EURUSD", SourcePrimary, 3*time.Second)}
	if r := checkSilentNotQuoted(pe, nil); len(r.Violations) != 0 {
		t.Fatalf("a new holder's first moments: %v", r.Violations)
	}
}

func candle(symbol string, open time.Time, bidLow, bidHigh, askLow, askHigh string) dbCandle {
	return dbCandle{Symbol: symbol, Open: open, BidLow: decimal.RequireFromString(bidLow), BidHigh: decimal.RequireFromString(bidHigh),
		AskLow: decimal.RequireFromString(askLow), AskHigh: decimal.RequireFromString(askHigh), Ticks: 3}
}

// A published tick outside its minute's candle, or in a minute with no candle, fails
// candlesAgree; a tick near a minute's edge may be in the next; a tick its holder may have died
// with before the batch is not judged.
func TestCandlesAgreeFailsAPublishedPriceOutsideItsCandle(t *testing.T) {
	s := priceSnapshot()
	s.Candles[candleKey("EURUSD", t0)] = candle("EURUSD", t0, "1.08000", "1.08100", "1.08002", "1.08102")
	s.Candles[candleKey("EURUSD", t0.Add(time.Minute))] = candle("EURUSD", t0.Add(time.Minute), "1.08200", "1.08300", "1.08202", "1.08302")
	pe := &PriceEvidence{Published: []PublishedTick{
		{Symbol: "EURUSD", Bid: 1.08050, Ask: 1.08052, At: t0.Add(10 * time.Second), Term: 2},
		{Symbol: "EURUSD", Bid: 1.08250, Ask: 1.08252, At: t0.Add(59500 * time.Millisecond), Term: 2}, // next minute's, at the edge
		{Symbol: "EURUSD", Bid: 1.09000, Ask: 1.09002, At: t0.Add(5 * time.Second), Term: 1},          // its holder died 3 s later
		{Symbol: "EURUSD", Bid: 1.08250, Ask: 1.08252, At: t0.Add(8 * time.Second), Term: 1},
		{Symbol: "EURUSD", Bid: 1.08250, Ask: 1.08252, At: t0.Add(90 * time.Second), Term: 2},
	}}
	if r := checkCandlesAgree(s, pe); len(r.Violations) != 0 {
		t.Fatalf("every judged tick inside its candle: %v", r.Violations)
	}
	pe.Published = append(pe.Published, PublishedTick{Symbol: "EURUSD", Bid: 1.08150, Ask: 1.08152, At: t0.Add(30 * time.Second), Term: 2},
		PublishedTick{Symbol: "EURUSD", Bid: 1.08250, Ask: 1.08252, At: t0.Add(150 * time.Second), Term: 2})
	r := checkCandlesAgree(s, pe)
	if len(r.Violations) != 2 || !strings.Contains(r.Violations[0].Text, "outside the candle") || !strings.Contains(r.Violations[1].Text, "no M1 candle") {
		t.Fatalf("want one tick outside its candle and one with none: %v", r.Violations)
	}
	s.CandlesRead, s.CandlesErr = false, "Table 'fx_candle' doesn't exist"
	if r := checkCandlesAgree(s, pe); len(r.Violations) != 1 {
		t.Fatalf("an unreadable candles table fails: %v", r.Violations)
	}
}

// The price lane reads fx_candle and the hedge fills through ReadSnapshot: its SQL must keep up
// with the migrations, and a tick the desk published in a candle's minute is judged inside it.
func TestReadSnapshotReadsTheCandlesAndHedgeFillsThePriceLaneJudges(t *testing.T) {
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := testDB.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	open := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	exec("INSERT INTO `fx_candle` (`symbol`, `granularity`, `openTime`, `bidOpen`, `bidHigh`, `bidLow`, `bidClose`, `askOpen`, `askHigh`, `askLow`, `askClose`, `ticks`) "+
		"VALUES ('GBPJPY', 'M1', ?, 190.1, 190.2, 190.0, 190.1, 190.12, 190.22, 190.02, 190.12, 4), ('GBPJPY', 'M5', ?, 1, 1, 1, 1, 1, 1, 1, 1, 1)", open, open)
	exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `status`, `fillPrice`) VALUES ('GBPJPY', 10000, 'HEDGER', 'FILLED', 190.15)")
	s, err := ReadSnapshot(ctx, testDB, Scope{})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s.Candles[candleKey("GBPJPY", open)]
	if !s.CandlesRead || !ok || len(s.Candles) != 1 || c.BidHigh.String() != "190.2" || c.AskLow.String() != "190.02" || c.Ticks != 4 {
		t.Fatalf("candles read %v (%s): %+v; want the one M1 candle", s.CandlesRead, s.CandlesErr, s.Candles)
	}
	if len(s.HedgeFills) != 1 || s.HedgeFills[0].Symbol != "GBPJPY" || s.HedgeFills[0].Price.String() != "190.15" {
		t.Fatalf("hedge fills %+v", s.HedgeFills)
	}
	s.Taken = open.Add(5 * time.Minute)
	pe := &PriceEvidence{Published: []PublishedTick{{Symbol: "GBPJPY", Bid: 190.15, Ask: 190.17, At: open.Add(30 * time.Second), Term: 1},
		{Symbol: "GBPJPY", Bid: 190.25, Ask: 190.27, At: open.Add(31 * time.Second), Term: 1}}}
	if r := checkCandlesAgree(s, pe); len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, "190.25") {
		t.Fatalf("want the tick above the candle's high broken: %v", r.Violations)
	}
}

// A process woken from a stop reads its sockets' backlog as fresh: its samples for one threshold
// after the stop are counted, not judged; another process's are judged.
func TestSilentNotQuotedExcusesAProcessJustWoken(t *testing.T) {
	pe := &PriceEvidence{Faults: []PriceFault{{Kind: PricePrimarySilent, Sources: []string{SourcePrimary}, Start: t0, End: t0.Add(6 * time.Second)}}}
	pe.Selections = []SelectionSample{selection(t0.Add(-10*time.Second), "EURUSD", SourcePrimary, time.Second),
		selection(t0.Add(4*time.Second), "EURUSD", SourcePrimary, time.Second)}
	stop := []Window{{Kind: FaultStop, Start: t0.Add(-3 * time.Second), End: t0.Add(3 * time.Second), PID: 1}}
	if r := checkSilentNotQuoted(pe, stop); len(r.Violations) != 0 || !strings.Contains(r.Figures, "1 more from a process just woken") {
		t.Fatalf("the woken holder on the primary 1 s after its stop: %v %s", r.Violations, r.Figures)
	}
	stop[0].PID = 2
	if r := checkSilentNotQuoted(pe, stop); len(r.Violations) != 1 {
		t.Fatalf("another process stopped: %v %s", r.Violations, r.Figures)
	}
}
