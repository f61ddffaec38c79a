package tick

import (
	"testing"
	"time"
)

const pip = 0.0001

func (r *rig) wantRejected(intent string, n int, want ...RejectedTick) {
	r.t.Helper()
	got := r.e.Rejected(0)
	if len(got) != n {
		r.t.Fatalf("%s: %d rejected, want %d: %+v", intent, len(got), n, got)
	}
	for i, w := range want {
		g := got[i]
		if g.Source != w.Source || g.Reason != w.Reason || g.Outcome != w.Outcome || abs(g.Bid-w.Bid) > 1e-9 {
			r.t.Fatalf("%s: rejected[%d] %+v, want %+v", intent, i, g, w)
		}
		if (w.Outcome == OutcomeHeld) != g.DecidedAt.IsZero() {
			r.t.Fatalf("%s: rejected[%d] decided at %s", intent, i, g.DecidedAt)
		}
	}
}

// drain returns every update published so far.
func (r *rig) drain() []Update {
	var out []Update
	for {
		select {
		case u := <-r.upd:
			out = append(out, u)
		default:
			return out
		}
	}
}

func TestSpikeIsDroppedWhenTheNextTickReturns(t *testing.T) {
	r := newRig(t, Config{}, "primary")
	mid := r.steady(40, 1.1, "primary")
	r.drain()
	spike := mid + 300*pip
	r.both(50*time.Millisecond, spike, "primary")
	r.want("spike held", "primary", mid)
	r.wantRejected("spike held", 1, RejectedTick{Source: "primary", Reason: RejectSpike, Outcome: OutcomeHeld, Bid: spike - 0.00001})
	r.both(50*time.Millisecond, mid+pip, "primary")
	r.want("back to the market", "primary", mid+pip)
	r.wantRejected("spike dropped", 1, RejectedTick{Source: "primary", Reason: RejectSpike, Outcome: OutcomeDropped, Bid: spike - 0.00001})
	for _, u := range r.drain() {
		if abs(u.Quote.Mid()-spike) < 100*pip {
			t.Fatalf("the spike reached an Updates subscriber: %+v", u)
		}
	}
	st := r.e.SourceStatuses()[0]
	if st.Held != 1 || st.Dropped != 1 || st.Published != 41 || st.Accepted != 42 {
		t.Fatalf("source status %+v", st)
	}
	if fc := r.e.FilterCounts(); len(fc) != 1 || fc[0] != (FilterCount{Symbol: "EURUSD", Source: "primary", Held: 1, Dropped: 1}) {
		t.Fatalf("filter counts %+v", fc)
	}
	// Even after the ConfirmAfter a dropped spike stays dropped.
	r.clock.advance(2 * time.Second)
	r.e.sweep(r.clock.Now())
	r.want("after ConfirmAfter", "primary", mid+pip)
}

func TestGapConfirmedByTheNextTick(t *testing.T) {
	r := newRig(t, Config{}, "primary")
	mid := r.steady(40, 1.1, "primary")
	gap := mid + 300*pip
	r.both(100*time.Millisecond, gap, "primary")
	r.want("gap held", "primary", mid)
	r.both(100*time.Millisecond, gap+pip, "primary")
	// Both the held tick and the confirming one are published, in order.
	var mids []float64
	for _, u := range r.drain() {
		mids = append(mids, u.Quote.Mid())
	}
	if n := len(mids); n < 2 || abs(mids[n-2]-gap) > 1e-9 || abs(mids[n-1]-gap-pip) > 1e-9 {
		t.Fatalf("published mids end %v, want the gap then gap+1 pip", mids[max(0, len(mids)-3):])
	}
	r.wantRejected("gap confirmed", 1, RejectedTick{Source: "primary", Reason: RejectSpike, Outcome: OutcomePublished, Bid: gap - 0.00001})
}

func TestGapConfirmedAfterConfirmAfterWhenNothingContradictsIt(t *testing.T) {
	r := newRig(t, Config{}, "primary")
	mid := r.steady(40, 1.1, "primary")
	gap := mid - 300*pip
	r.both(100*time.Millisecond, gap, "primary")
	r.clock.advance(999 * time.Millisecond)
	r.e.sweep(r.clock.Now())
	r.want("inside ConfirmAfter", "primary", mid)
	r.clock.advance(time.Millisecond)
	r.e.sweep(r.clock.Now())
	r.want("at ConfirmAfter", "primary", gap)
	if q, _ := r.e.LastTick("EURUSD"); !q.ReceivedAt.Equal(r.clock.Now().Add(-time.Second)) {
		t.Fatalf("ReceivedAt %s is not the held tick's arrival", q.ReceivedAt)
	}
	// The band learnt nothing odd: a normal move is published at once.
	r.both(100*time.Millisecond, gap+2*pip, "primary")
	r.want("after the gap", "primary", gap+2*pip)
}

func TestGapOnBothSourcesConfirmedByTheOther(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	gap := mid + 300*pip
	r.clock.advance(100 * time.Millisecond)
	r.tick("primary", gap)
	r.want("gap held on the primary", "primary", mid)
	r.tick("backup", gap+0.2*pip)
	r.want("confirmed by the backup", "primary", gap)
	r.wantNoSwitch("a gap on both is no failover")
	// A second jump on the primary alone is contradicted by the backup.
	r.clock.advance(100 * time.Millisecond)
	r.tick("primary", gap+400*pip)
	r.clock.advance(200 * time.Millisecond)
	r.tick("backup", gap)
	r.want("contradicted by the backup", "primary", gap)
	// (The third, oldest: the primary's very first tick, unreferenced until the backup agreed.)
	r.wantRejected("contradicted", 3, RejectedTick{Source: "primary", Reason: RejectSpike, Outcome: OutcomeDropped, Bid: gap + 400*pip - 0.00001})
}

// When the backup's gapped tick comes first, the primary's is already confirmed as it arrives:
// nothing is held.
func TestGapTheBackupQuotedFirstIsPublishedAtOnce(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	gap := mid + 300*pip
	before := len(r.e.Rejected(0))
	r.clock.advance(100 * time.Millisecond)
	r.tick("backup", gap+0.2*pip)
	r.want("the backup's gap alone", "primary", mid)
	r.tick("primary", gap)
	r.want("the primary's gap, the backup already there", "primary", gap)
	if got := r.e.Rejected(0); len(got) != before {
		t.Fatalf("held or dropped %+v, want nothing new", got[:len(got)-before])
	}
	r.wantNoSwitch("a gap on both is no failover")
}

func TestSpikeOnThePrimaryDroppedByTheBackupWithoutFailover(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	spike := mid + 300*pip
	r.clock.advance(20 * time.Millisecond)
	r.tick("primary", spike)
	r.clock.advance(20 * time.Millisecond)
	r.tick("backup", mid)
	r.wantRejected("disagreed by the backup", 2, RejectedTick{Source: "primary", Reason: RejectSpike, Outcome: OutcomeDropped, Bid: spike - 0.00001})
	r.steady(5, mid, "primary", "backup")
	r.wantNoSwitch("one off-market tick is not a failover")
}

func TestDisagreeingSourceIsHeldThenFailedOver(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	// The primary drifts 3 pips a tick away from the backup: each move is small, but past 30
	// pips from the backup its ticks are held as disagreeing and dropped by the backup's.
	p := mid
	for p < mid+29*pip {
		p += 3 * pip
		r.clock.advance(100 * time.Millisecond)
		r.tick("primary", p)
		r.tick("backup", mid)
	}
	r.want("within the band", "primary", p)
	p += 6 * pip
	r.clock.advance(100 * time.Millisecond)
	r.tick("primary", p)
	r.want("held as disagreeing", "primary", p-6*pip)
	got := r.e.Rejected(1)
	if len(got) != 1 || got[0].Reason != RejectDisagrees || got[0].Outcome != OutcomeHeld {
		t.Fatalf("rejected %+v", got)
	}
	r.tick("backup", mid)
	if got := r.e.Rejected(1); got[0].Outcome != OutcomeDropped {
		t.Fatalf("rejected %+v", got)
	}
}

func TestOffsetPrimaryFailsOverAndBackupOffMarketHeldAtFailover(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	// The primary jumps 50 pips off and stays: its first off tick is a held spike, the
	// second makes it off-band — unhealthy — and the desk fails over to the backup.
	r.both(100*time.Millisecond, mid+50*pip, "primary")
	r.tick("backup", mid)
	r.both(100*time.Millisecond, mid+50*pip, "primary")
	sw := r.wantSwitch("offset primary", "primary", "backup")
	if sw.Reason != "primary off-band" {
		t.Fatalf("reason %q", sw.Reason)
	}
	r.want("on the backup", "backup", mid)

	// Now the other way round: the backup's last tick is off-market when the primary fails.
	r2 := newRig(t, Config{}, "primary", "backup")
	mid = r2.steady(40, 1.1, "primary", "backup")
	r2.clock.advance(100 * time.Millisecond)
	r2.tick("backup", mid+300*pip) // one off-market tick on the backup
	r2.feed("primary").SetConnected(false, nil)
	r2.wantSwitch("primary down", "primary", "backup")
	r2.want("the backup's off-market tick is held, not published", "primary", mid)
	got := r2.e.Rejected(1)
	if len(got) != 1 || got[0].Source != "backup" || got[0].Reason != RejectSpike || got[0].Outcome != OutcomeHeld {
		t.Fatalf("rejected %+v", got)
	}
	r2.both(100*time.Millisecond, mid+pip, "backup")
	r2.want("the backup's next tick", "backup", mid+pip)
	if got := r2.e.Rejected(1); got[0].Outcome != OutcomeDropped {
		t.Fatalf("rejected %+v", got)
	}
}

func TestBandFollowsTheMarketsTypicalMove(t *testing.T) {
	r := newRig(t, Config{}, "primary")
	// A market moving 2 to 18 pips a tick (median 10, MAD 4): the band is 10 + 12 x 1.4826 x 4
	// = 81 pips, so a 60-pip move (past the 30-pip floor) is ordinary and a 100-pip one is held.
	mid := 1.1
	for i := range 40 {
		step := float64(2+4*(i%5)) * pip
		if i%2 == 0 {
			mid += step
		} else {
			mid -= step
		}
		r.both(100*time.Millisecond, mid, "primary")
	}
	r.both(100*time.Millisecond, mid+60*pip, "primary")
	r.want("60 pips in a 10-pip market", "primary", mid+60*pip)
	if n := len(r.e.Rejected(0)); n != 0 {
		t.Fatalf("%d rejected", n)
	}
	mid += 60 * pip
	r.both(100*time.Millisecond, mid+100*pip, "primary")
	r.want("100 pips in a 10-pip market", "primary", mid)
	// A quiet market (0.1-pip moves) with a 5-pip floor holds a 6-pip jump.
	r2 := newRig(t, Config{Filter: FilterConfig{FloorPips: 5}}, "primary")
	mid = r2.steady(40, 1.1, "primary")
	r2.both(100*time.Millisecond, mid+6*pip, "primary")
	r2.want("6 pips in a quiet market", "primary", mid)
}

func TestJPYPipAndPipSizeConfig(t *testing.T) {
	if DefaultPipSize("USDJPY") != 0.01 || DefaultPipSize("EURUSD") != 0.0001 {
		t.Fatal("default pip sizes")
	}
	r := newRig(t, Config{PipSize: func(string) float64 { return 0.01 }}, "primary")
	mid := r.steady(40, 1.1, "primary")
	r.both(100*time.Millisecond, mid+0.02, "primary") // 200 "EURUSD" pips, 2 pips at 0.01
	r.want("within a 30-pip floor of 0.01", "primary", mid+0.02)
}

// A new holder's engine has no price to judge a first tick by. The soak found the backup's spike,
// quoted before the primary's first tick, published and acted on; now it waits for a
// confirmation like any spike and is dropped when the market contradicts it.
func TestAnUnreferencedFirstTickWaitsForItsConfirmation(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	r.clock.advance(100 * time.Millisecond)
	r.tick("backup", 1.1222) // the spike, before the primary has quoted
	if q, ok := r.e.LastTick("EURUSD"); ok {
		t.Fatalf("the backup's unreferenced first tick was published: %+v", q)
	}
	r.clock.advance(50 * time.Millisecond)
	r.tick("backup", 1.1000) // the market: contradicts it
	r.tick("primary", 1.1001)
	r.want("the primary's first quote, the backup agreeing", "primary", 1.1001)
	got := r.e.Rejected(0)
	if len(got) == 0 || got[len(got)-1].Reason != RejectUnreferenced || got[len(got)-1].Outcome != OutcomeDropped || abs(got[len(got)-1].Bid-(1.1222-0.00001)) > 1e-9 {
		t.Fatalf("rejected %+v, want the spike first, unreferenced and dropped", got)
	}

	// With no other source to ask, an unreferenced tick is published after ConfirmAfter.
	r2 := newRig(t, Config{}, "primary", "backup")
	r2.tick("primary", 1.1)
	r2.clock.advance(1100 * time.Millisecond)
	r2.e.sweep(r2.clock.Now())
	r2.want("unchallenged for ConfirmAfter", "primary", 1.1)
}

// A price only one source quoted is no evidence of which source moved. The backup, quoting alone,
// published its jump; the primary came back at the market, stood off that published price and was
// judged off-band itself, so the desk stayed on the off-market backup while a healthy primary
// disagreed — one way the soak's trailing stops (seed 126960055552749) could fire on the backup's
// offset. Off-band is now judged against the last price two sources agreed on.
func TestALoneSourcesJumpDoesNotOutvoteAReturningSource(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	r.feed("primary").SetConnected(false, nil)
	r.wantSwitch("primary down", "primary", "backup")

	// Alone, the backup jumps 100 pips and stays: a gap for all the desk can tell, published once
	// it has stood ConfirmAfter.
	off := mid + 100*pip
	for range 11 {
		r.both(100*time.Millisecond, off, "backup")
	}
	r.want("a lone source's confirmed jump", "backup", off)
	r.drain()

	// The primary comes back at the market: from its first tick, with a healthy source
	// disagreeing, the backup's price must not be published again.
	r.feed("primary").SetConnected(true, nil)
	for range 4 {
		r.both(100*time.Millisecond, mid, "primary")
		r.both(0, off, "backup")
	}
	for _, u := range r.drain() {
		if abs(u.Quote.Mid()-mid) > 30*pip {
			t.Fatalf("published %s's %.5f while the primary quoted %.5f", u.Quote.Source, u.Quote.Mid(), mid)
		}
	}
	r.want("back on the primary", "primary", mid)
	if sel := r.e.Selections()[0]; sel.Health[0].Healthy == false || sel.Health[1].Reason != "off-band" {
		t.Fatalf("health %+v, want the primary healthy and the backup off-band", sel.Health)
	}
}

// At a takeover the backup's first ticks can come before the primary's first quote. The backup
// quoting off the market for seconds (an offset, not a spike) used to confirm its own
// unreferenced tick with its next one and set the new holder's price; a source that has not
// quoted the symbol yet is now waited for, up to ConfirmAfter.
func TestAnUnreferencedTickWaitsForAnotherSourcesFirstQuote(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	off := 1.1 + 100*pip
	for range 3 { // 300 ms of the backup alone, off the market
		r.both(100*time.Millisecond, off, "backup")
	}
	if q, ok := r.e.LastTick("EURUSD"); ok {
		t.Fatalf("the backup's unreferenced ticks were published before the primary quoted: %+v", q)
	}
	// Two sources disagree and no price was ever agreed on: nothing tells which moved, so
	// neither is published (the primary's ticks are held as disagreeing) until they agree.
	for range 20 {
		r.both(100*time.Millisecond, 1.1, "primary")
		r.both(0, off, "backup")
	}
	if q, ok := r.e.LastTick("EURUSD"); ok {
		t.Fatalf("published while the sources disagreed with no agreed price: %+v", q)
	}
	r.both(100*time.Millisecond, 1.1, "primary")
	r.both(0, 1.1, "backup")
	r.want("the primary's price once the backup agrees", "primary", 1.1)

	// A source that never quotes is waited for ConfirmAfter, counted from the first tick
	// held, however often the lone source ticks meanwhile.
	r2 := newRig(t, Config{}, "primary", "backup")
	for range 9 {
		r2.both(100*time.Millisecond, 1.1, "backup")
		r2.e.sweep(r2.clock.Now())
	}
	if q, ok := r2.e.LastTick("EURUSD"); ok {
		t.Fatalf("published before ConfirmAfter: %+v", q)
	}
	r2.both(200*time.Millisecond, 1.1, "backup")
	r2.e.sweep(r2.clock.Now())
	r2.want("the lone backup after ConfirmAfter", "backup", 1.1)
}

// With no other healthy source to ask, a jump on a desk of several sources waits ConfirmAfter
// (of the engine's running time) however often its source repeats it: the other source may be
// reconnecting. The soak (seed 52495139321875) saw a holder resume from a stop taken during a
// primaryDown, its primary still disconnected, and publish the backup's 136-pip offset from the
// backlog, the next backlog tick 44 µs later confirming the first; the primary quoted the market
// 0.4 s later.
func TestALoneSourcesJumpWaitsConfirmAfter(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	mid := r.steady(40, 1.1, "primary", "backup")
	r.feed("primary").SetConnected(false, nil)
	r.wantSwitch("primary down", "primary", "backup")
	r.drain()
	off := mid - 136*pip
	for range 5 { // a backlog: the ticks come microseconds apart
		r.both(time.Microsecond*44, off, "backup")
	}
	for range 4 {
		r.both(100*time.Millisecond, off, "backup")
		r.e.sweep(r.clock.Now())
	}
	if q, _ := r.e.LastTick("EURUSD"); abs(q.Mid()-off) < 30*pip {
		t.Fatalf("a lone source's jump published within ConfirmAfter: %+v", q)
	}
	r.feed("primary").SetConnected(true, nil)
	for range 3 {
		r.both(100*time.Millisecond, mid, "primary")
		r.both(0, off, "backup")
	}
	for _, u := range r.drain() {
		if abs(u.Quote.Mid()-mid) > 30*pip {
			t.Fatalf("published %s's %.5f", u.Quote.Source, u.Quote.Mid())
		}
	}
	r.want("the returning primary's market", "primary", mid)
}

// Two sources that disagree from a new holder's first tick and never agree leave nothing to tell
// which of them moved: nothing is published for HoldDown (the test above), and past it the desk
// is not left dark for ever — the first source to stand off twice over is failed over from, as
// with a price once agreed on, and the other's price is published after ConfirmAfter, as any
// price no other source confirms.
func TestADisagreementPastHoldDownFailsOverRatherThanStayingDark(t *testing.T) {
	r := newRig(t, Config{}, "primary", "backup")
	off := 1.1 + 100*pip
	rounds := int(10*time.Second/(100*time.Millisecond)) - 1 // HoldDown's default, less a round
	for range rounds {
		r.both(100*time.Millisecond, 1.1, "primary")
		r.both(0, off, "backup")
		r.e.sweep(r.clock.Now())
	}
	if q, ok := r.e.LastTick("EURUSD"); ok {
		t.Fatalf("published within HoldDown while the sources disagreed with no agreed price: %+v", q)
	}
	r.wantNoSwitch("within HoldDown")
	for range 3 {
		r.both(100*time.Millisecond, 1.1, "primary")
		r.both(0, off, "backup")
		r.e.sweep(r.clock.Now())
	}
	sw := r.wantSwitch("past HoldDown: the primary, first to stand off, is failed over from", "primary", "backup")
	if sw.Reason != "primary off-band" {
		t.Fatalf("switch reason %q", sw.Reason)
	}
	// Its price, which no other source confirms, is published once it stood ConfirmAfter.
	for range 11 {
		r.both(100*time.Millisecond, 1.1, "primary")
		r.both(0, off, "backup")
		r.e.sweep(r.clock.Now())
	}
	r.want("the backup's price published", "backup", off)
}
