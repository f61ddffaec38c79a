package soak

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/soak/invariant"
)

// Fault kinds, as the summary counts them.
const (
	faultKill         = "kill"                // SIGKILL the holder, start a replacement web
	faultStop         = invariant.FaultStop   // SIGSTOP the holder past the TTL, SIGCONT it alone
	faultZombie       = invariant.FaultZombie // SIGSTOP the holder, a replacement takes over, SIGCONT the old one
	faultGap          = "gap"                 // the holder's price jumps far, through many stops
	faultRollover2    = "rollover2"           // two processFxSwaps runs at once
	faultRolloverKill = "rolloverKill"        // a processFxSwaps run SIGKILLed mid-way, then rerun
	// invariant.FaultCut: every MySQL or Redis connection cut for a few seconds

	// Venue faults, injected through the venue simulator's control API on a lane of their own,
	// so they meet the process faults above instead of waiting for them.
	faultVenueTimeout = "venueTimeout" // the next orders or closes execute, their answers never come
	faultVenueHold    = "venueHold"    // the next orders execute, their answers wait for a release
	faultVenue5xx     = "venue5xx"     // the next trading requests answer 503, executing nothing
	faultVenueOutage  = "venueOutage"  // the venue's trading listener is down for a moment
	faultVenueClose   = "venueClose"   // the venue closes an open EXTERNAL trade itself (a stop-out)
)

var (
	processFaultKinds = []string{faultKill, faultStop, faultZombie, faultGap, faultRollover2, faultRolloverKill, invariant.FaultCut}
	venueFaultKinds   = []string{faultVenueTimeout, faultVenueHold, faultVenue5xx, faultVenueOutage, faultVenueClose}
	// faultKinds is every kind, in the summary's order.
	faultKinds = slices.Concat(processFaultKinds, venueFaultKinds, frontDoorFaultKinds)
)

func isVenueFault(kind string) bool { return strings.HasPrefix(kind, "venue") }

// fault is one scheduled fault with every parameter drawn from the seed, so a seed replays it.
type fault struct {
	At   time.Duration `json:"at"` // after the load starts; the fault starts no earlier
	Kind string        `json:"kind"`

	Pause      time.Duration `json:"pause,omitempty"`      // stop, zombie: how long SIGSTOPped
	ZombieLife time.Duration `json:"zombieLife,omitempty"` // zombie: how long it lives resumed before SIGTERM
	Symbol     string        `json:"symbol,omitempty"`     // gap
	Factor     float64       `json:"factor,omitempty"`     // gap: new price = price × factor
	Restore    time.Duration `json:"restore,omitempty"`    // gap: back to the old price after this (0: never)
	Late       time.Duration `json:"late,omitempty"`       // rollover: --at = the walk's next weekday rollover + this (on time: < 30 min)
	KillAfter  time.Duration `json:"killAfter,omitempty"`  // rolloverKill
	Target     string        `json:"target,omitempty"`     // cut: mysql or redis; flood: holder or follower
	CutFor     time.Duration `json:"cutFor,omitempty"`     // cut
	Count      int           `json:"count,omitempty"`      // venueTimeout, venueHold, venue5xx: requests it applies to; flood: unknown tokens sent
	HoldFor    time.Duration `json:"holdFor,omitempty"`    // venueTimeout: answer held before the cut; venueHold: until the release; flood: how long its streams are held
	DownFor    time.Duration `json:"downFor,omitempty"`    // venueOutage
	Pick       float64       `json:"pick,omitempty"`       // venueClose: which open trade, as a share of them in id order; reusedNonce: which accepted order, in journal order
	Streams    int           `json:"streams,omitempty"`    // flood: markets-rail streams opened with the attacker's token
	Bodies     int           `json:"bodies,omitempty"`     // flood: oversized, wrong Content-Type and duplicate-key bodies sent
	LoseFor    time.Duration `json:"loseFor,omitempty"`    // lostJournalReply: how long MySQL's answer is dropped before the cut
	Units      int64         `json:"units,omitempty"`      // venueOddUnits: what the venue can fill of each order
	Source     string        `json:"source,omitempty"`     // priceSpike, priceOffset: which price source (primary, backup)
	Pips       float64       `json:"pips,omitempty"`       // priceSpike, priceOffset: how far off the market, signed
}

// String is the fault as the schedule log shows it: every parameter, durations readable.
func (f fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at=%s %s", f.At, f.Kind)
	add := func(k string, v any, set bool) {
		if set {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
	}
	add("pause", f.Pause, f.Pause > 0)
	add("zombieLife", f.ZombieLife, f.ZombieLife > 0)
	add("source", f.Source, f.Source != "")
	add("symbol", f.Symbol, f.Symbol != "")
	add("pips", fmt.Sprintf("%+g", f.Pips), f.Pips != 0)
	add("factor", fmt.Sprintf("%.4f", f.Factor), f.Factor != 0)
	add("restoreAfter", f.Restore, f.Restore > 0)
	add("late", f.Late, f.Kind == faultRollover2 || f.Kind == faultRolloverKill)
	add("killAfter", f.KillAfter, f.KillAfter > 0)
	add("target", f.Target, f.Target != "")
	add("cutFor", f.CutFor, f.CutFor > 0)
	add("count", f.Count, f.Count > 0)
	add("streams", f.Streams, f.Streams > 0)
	add("bodies", f.Bodies, f.Bodies > 0)
	add("holdFor", f.HoldFor, f.HoldFor > 0)
	add("downFor", f.DownFor, f.DownFor > 0)
	add("loseFor", f.LoseFor, f.LoseFor > 0)
	add("units", f.Units, f.Units > 0)
	add("pick", fmt.Sprintf("%.3f", f.Pick), f.Kind == faultVenueClose || f.Kind == faultReusedNonce)
	return b.String()
}

// schedule draws the faults of a soak of d from seed, in time order: the process faults (every
// kind once in a seeded order while there is room, then kinds at random, 3–7 s apart, from 8 s
// in to 15 s before the end) and, each from a generator of its own, the venue faults (alike, 2–5 s
// apart from 10 s in), the front-door faults (frontDoorSchedule) and, on the FIX lane, the lost
// journal replies (lostReplySchedule) and, when the seed's venue knobs say so, the odd-unit
// fills (oddUnitsSchedule), and the price lane's faults on the two price sources (priceSchedule).
// A seed's process faults are what they were before the
// venue lane existed, its venue faults before the front-door lane, and every other lane's faults
// before the lost journal replies.
// On clusters (ha), the cluster faults come on a lane of their own (clusterSchedule), and a
// Redis cut is a MySQL cut on Sentinel: the desk's failover client connects to the primary the
// Sentinels name, not to a proxy the soak could cut.
func schedule(seed uint64, d time.Duration, ha clusterChoice, lane string) []fault {
	process := processSchedule(seed, d)
	if ha.sentinel {
		for i := range process {
			if process[i].Kind == invariant.FaultCut && process[i].Target == "redis" {
				process[i].Target = "mysql"
			}
		}
	}
	out := slices.Concat(process, venueSchedule(seed, d), frontDoorSchedule(seed, d), clusterSchedule(seed, d, ha.kinds()), priceSchedule(seed, d))
	if lane == invariant.LaneFIX {
		out = append(out, lostReplySchedule(seed, d)...)
		if fixVenueKnobsOf(seed).OddUnits {
			out = append(out, oddUnitsSchedule(seed, d)...)
		}
	}
	slices.SortStableFunc(out, func(a, b fault) int { return cmp.Compare(a.At, b.At) })
	return out
}

// drawLane draws one lane's faults from rng: every kind once in a seeded order while there is
// room, then kinds at random, from the first instant on, base plus up to spread milliseconds
// apart, until 15 s before the end; params draws each fault's parameters. The draws keep their
// order (the shuffle, then per fault its kind, its parameters and the gap to the next), so a seed
// replays its schedule.
func drawLane(rng *rand.Rand, kinds []string, first, base time.Duration, spread int, d time.Duration, params func(f *fault)) []fault {
	order := append([]string(nil), kinds...)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var out []fault
	for at := first; at <= d-15*time.Second; at += base + time.Duration(rng.IntN(spread))*time.Millisecond {
		kind := kinds[rng.IntN(len(kinds))]
		if len(out) < len(order) {
			kind = order[len(out)]
		}
		f := fault{At: at, Kind: kind}
		params(&f)
		out = append(out, f)
	}
	return out
}

func processSchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed50a4))
	return drawLane(rng, processFaultKinds, 8*time.Second, 3000*time.Millisecond, 4000, d, func(f *fault) {
		switch f.Kind {
		case faultStop, faultZombie:
			f.Pause = leaseTTL + time.Duration(500+rng.IntN(2500))*time.Millisecond
			if f.Kind == faultZombie {
				f.ZombieLife = time.Duration(6+rng.IntN(10)) * time.Second
			}
		case faultGap:
			f.Symbol = soakSymbols[rng.IntN(len(soakSymbols))].symbol
			f.Factor = 1 + (0.03+rng.Float64()*0.07)*float64(1-2*rng.IntN(2))
			if rng.IntN(2) == 0 {
				f.Restore = time.Duration(500+rng.IntN(2500)) * time.Millisecond
			}
		case faultRollover2, faultRolloverKill:
			// The draw that once said how many hours ahead: a seed's schedule stays what it was.
			f.Late = time.Duration(rng.IntN(72)) * 20 * time.Second
			if f.Kind == faultRolloverKill {
				f.KillAfter = time.Duration(20+rng.IntN(400)) * time.Millisecond
			}
		case invariant.FaultCut:
			f.Target = []string{"mysql", "redis"}[rng.IntN(2)]
			f.CutFor = time.Duration(1500+rng.IntN(3000)) * time.Millisecond
		}
	})
}

func venueSchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x7e17e5a4))
	return drawLane(rng, venueFaultKinds, 10*time.Second, 2000*time.Millisecond, 3000, d, func(f *fault) {
		switch f.Kind {
		case faultVenueTimeout:
			// Held past the desk's venue timeout: the desk gives up, the venue has executed.
			f.Count = 1 + rng.IntN(3)
			f.HoldFor = venueTimeout + time.Duration(500+rng.IntN(2500))*time.Millisecond
		case faultVenueHold:
			// Released either before the desk's timeout (a late answer) or after it (unknown).
			f.Count = 1 + rng.IntN(3)
			f.HoldFor = time.Duration(200+rng.IntN(1800)) * time.Millisecond
		case faultVenue5xx:
			f.Count = 1 + rng.IntN(5)
		case faultVenueOutage:
			f.DownFor = time.Duration(1000+rng.IntN(2500)) * time.Millisecond
		case faultVenueClose:
			f.Pick = rng.Float64()
		}
	})
}

// injector runs the schedule against the cluster.
type injector struct {
	c   *cluster
	s   *sampler
	log *log.Logger
	// fills runs fills back to back until its context ends: rollover runs race it, as they race
	// fills on a busy desk.
	fills func(ctx context.Context)
	// j is the journal the front-door faults send through; traders are the load's clients by
	// name, whose orders a reusedNonce fault sends again.
	j       *journal
	traders map[string]*trader
	// serial keeps one fault acting at a time: a zombie's end, which runs in the background,
	// reads the lease around its SIGTERM and must not see another fault's takeover.
	serial sync.Mutex
	// walk gives the rollover runs their days; eod keeps the end-of-day rows as first read,
	// after every run (endofday.go).
	walk *rolloverWalk
	eod  *eodWatch

	mu      sync.Mutex
	counts  map[string]int
	runs    []invariant.RolloverRun
	windows []invariant.Window
	lastEnd time.Time
	errs    []string
	bg      sync.WaitGroup
	runSeq  int
	floods  []invariant.Flood
	reuses  []invariant.Reuse
	// recoveries are the cluster faults' measures, one line each, for the report.
	recoveries []string
	// loser loses journal replies at the MySQL proxy, made at the first lostJournalReply.
	loser     *replyLoser
	loserOnce sync.Once
	// prices is the price lane's watch, which keeps the price faults (and the gaps) for its checks.
	prices *priceWatch
}

func (in *injector) note(w invariant.Window) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.windows = append(in.windows, w)
	if w.End.After(in.lastEnd) {
		in.lastEnd = w.End
	}
}

func (in *injector) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	in.log.Printf("soak: fault trouble: %s", msg)
	in.mu.Lock()
	in.errs = append(in.errs, msg)
	in.mu.Unlock()
}

// run executes faults in order, each no earlier than its time after start: the process faults
// one at a time, the venue faults, the front-door faults, the cluster faults and the lost journal
// replies beside them on lanes of their own.
func (in *injector) run(ctx context.Context, start time.Time, faults []fault) {
	var venue, frontDoor, cluster, lostReply, oddUnits, price, process []fault
	for _, f := range faults {
		switch {
		case isPriceFault(f.Kind):
			price = append(price, f)
		case f.Kind == faultLostJournalReply:
			lostReply = append(lostReply, f)
		case f.Kind == faultVenueOddUnits:
			oddUnits = append(oddUnits, f)
		case isVenueFault(f.Kind):
			venue = append(venue, f)
		case isFrontDoorFault(f.Kind):
			frontDoor = append(frontDoor, f)
		case isClusterFault(f.Kind):
			cluster = append(cluster, f)
		default:
			process = append(process, f)
		}
	}
	var lanes sync.WaitGroup
	lanes.Go(func() { in.lane(ctx, start, venue) })
	lanes.Go(func() { in.lane(ctx, start, frontDoor) })
	lanes.Go(func() { in.lane(ctx, start, cluster) })
	lanes.Go(func() { in.lane(ctx, start, lostReply) })
	lanes.Go(func() { in.lane(ctx, start, oddUnits) })
	lanes.Go(func() { in.lane(ctx, start, price) })
	in.lane(ctx, start, process)
	lanes.Wait()
}

func (in *injector) lane(ctx context.Context, start time.Time, faults []fault) {
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.At))):
		}
		in.log.Printf("soak: fault %s", f)
		switch {
		case isPriceFault(f.Kind):
			in.injectPrice(ctx, f)
		case f.Kind == faultLostJournalReply:
			in.injectLostReply(ctx, f)
		case isVenueFault(f.Kind):
			in.injectVenue(ctx, f)
		case isFrontDoorFault(f.Kind):
			in.injectFrontDoor(ctx, f)
		case isClusterFault(f.Kind):
			in.injectCluster(ctx, f)
		default:
			in.serial.Lock()
			in.inject(ctx, f)
			in.serial.Unlock()
		}
		in.mu.Lock()
		in.counts[f.Kind]++
		in.mu.Unlock()
	}
}

// wait waits for faults still playing out in the background (a zombie's life).
func (in *injector) wait() { in.bg.Wait() }

func (in *injector) holderOrNote(ctx context.Context, f fault) *proc {
	h, err := in.c.waitHolder(ctx, 10*time.Second, nil)
	if err != nil {
		in.fail("%s: %v", f.Kind, err)
		return nil
	}
	return h
}

func (in *injector) inject(ctx context.Context, f fault) {
	switch f.Kind {
	case faultKill:
		h := in.holderOrNote(ctx, f)
		if h == nil {
			return
		}
		t0 := time.Now()
		h.kill(syscall.SIGKILL)
		in.replace(ctx, f, h)
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: h.name + " killed", PID: h.pid})
	case faultStop, faultZombie:
		h := in.holderOrNote(ctx, f)
		if h == nil {
			return
		}
		t0 := time.Now()
		h.signal(syscall.SIGSTOP)
		time.Sleep(f.Pause)
		if f.Kind == faultStop {
			h.signal(syscall.SIGCONT)
			if _, err := in.c.waitHolder(ctx, 10*time.Second, nil); err != nil {
				in.fail("stop: after SIGCONT of %s: %v", h.name, err)
			}
			in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: h.name + " stopped and resumed alone", PID: h.pid})
			return
		}
		// A web process claims only at boot: start the replacement once the row has expired.
		if err := in.c.waitRowExpired(ctx, 10*time.Second); err != nil {
			in.fail("zombie: %v", err)
		}
		in.replace(ctx, f, h)
		h.signal(syscall.SIGCONT)
		resumed := time.Now()
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: resumed, Note: h.name + " stopped, replaced, resumed as a zombie", PID: h.pid})
		in.bg.Go(func() {
			select {
			case <-ctx.Done():
			case <-time.After(f.ZombieLife):
			}
			// An operator restarts the loser: SIGTERM, which must release nothing of the new holder's.
			in.serial.Lock()
			defer in.serial.Unlock()
			// A fault that ran while the zombie lived (a MySQL cut, say) can leave the live
			// holder's row lapsed until its next renew: the SIGTERM is judged against a live row,
			// or not at all (the check below needs before.Live).
			in.c.waitHolder(ctx, 10*time.Second, h)
			before, okBefore, _ := in.c.readRow(ctx)
			keyBefore, keyTTL, keyErrBefore := in.redisLeaseKeyTTL(ctx)
			keyRead := time.Now()
			h.kill(syscall.SIGTERM)
			after, okAfter, err := in.c.readRow(ctx)
			keyAfter, keyErrAfter := in.redisLeaseKey(ctx)
			// A key gone once its time to live has run out expired: the holder could not refresh
			// it (Redis unreachable from it a moment), which says nothing of the zombie. Gone
			// before then, something deleted it.
			expired := keyAfter == "" && time.Since(keyRead) >= keyTTL
			if err == nil && okBefore && before.Live && before.PID != h.pid && (!okAfter || !after.Live || after.Term != before.Term) {
				in.fail("zombie: SIGTERM of %s (lost) changed the live lease: before %+v, after %+v", h.name, before, after)
			}
			// The zombie's release must not delete or rewrite the new holder's key: a key that
			// named the live holder before the SIGTERM names it after, and is still there.
			if keyErrBefore == nil && keyErrAfter == nil && okBefore && before.Live && before.PID != h.pid &&
				keyBefore == before.String() && keyAfter != keyBefore && !expired {
				gone := keyAfter
				if gone == "" {
					gone = "gone"
				}
				in.fail("zombie: SIGTERM of %s (lost) changed the new holder's Redis lease key: %q before, %s after", h.name, keyBefore, gone)
			}
			if keyErrAfter == nil && keyAfter == fmt.Sprintf("%s:%d", hostname, h.pid) {
				in.fail("zombie: after SIGTERM of %s (lost) the Redis lease key still names it", h.name)
			}
			in.note(invariant.Window{Kind: "zombieLife", Start: resumed, End: time.Now(), Note: h.name + " lived as a zombie", PID: h.pid})
		})
	case faultGap:
		// The market jumps: both price sources and the market the venue prices from;
		// the holder's risk engine closes through the stops, EXTERNAL ones at the venue. A gap on
		// one source alone would be a disagreeing source, which the filter must refuse.
		feed := in.c.feed
		t0 := time.Now()
		bid, ask, err := simPrice(in.c.market, f.Symbol) // the market's, never off it (an offset source is)
		if err != nil {
			in.fail("gap: %v", err)
			return
		}
		// At the symbol's digits, as a provider quotes: the venue fills at the feed's price and
		// the desk books it, so an unrounded float would be a price no venue ever reports.
		digits := 5
		for _, s := range soakSymbols {
			if s.symbol == f.Symbol {
				digits = int(s.digits)
			}
		}
		round := func(v float64) float64 { p := math.Pow10(digits); return math.Round(v*p) / p }
		for _, src := range []*sim{feed, in.c.backup, in.c.market} {
			if err := setSimPrice(src, f.Symbol, round(bid*f.Factor), round(ask*f.Factor)); err != nil {
				in.fail("gap: %v", err)
				return
			}
		}
		if f.Restore > 0 {
			time.Sleep(f.Restore)
			for _, src := range []*sim{feed, in.c.backup, in.c.market} {
				if err := setSimPrice(src, f.Symbol, bid, ask); err != nil {
					in.fail("gap restore: %v", err)
				}
			}
		}
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: fmt.Sprintf("%s ×%.4f", f.Symbol, f.Factor)})
		if in.prices != nil {
			in.prices.fault(invariant.PriceFault{Kind: invariant.PriceGap, Sources: []string{invariant.SourcePrimary, invariant.SourceBackup}, Symbol: f.Symbol, Start: t0, End: time.Now()})
		}
	case faultRollover2:
		day := in.walk.step()
		at := day.At.Add(f.Late).UTC()
		t0 := time.Now()
		defer in.racingFills(ctx)()
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { in.rollover(ctx, at, 0, "concurrent pair") })
		}
		wg.Wait()
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now()})
	case faultRolloverKill:
		day := in.walk.step()
		at := day.At.Add(f.Late).UTC()
		t0 := time.Now()
		// Fills race the runs, not the held freeze between them: a burst held for the stall's
		// seconds as well would outrun the traders' own rate limit (loadNotLimited, seed
		// 160524270648490), which no desk fault causes.
		stop := in.racingFills(ctx)
		in.rollover(ctx, at, f.KillAfter, "killed mid-way")
		stop()
		left := false
		if in.walk.skipDue() {
			// The cron process dies at the rollover once it has the day's prices and stays down
			// until the next: that run catches the day up. When the day was not left so (the run
			// killed mid-way froze it, or the mirror had no prices), a later fault tries again.
			if left = in.rolloverStalled(ctx, day, at, stallAfterCapture); left {
				in.walk.skipDone()
			}
		} else {
			in.rolloverStalled(ctx, day, at, stallAfterAccounts)
		}
		if !left {
			stop := in.racingFills(ctx)
			in.rollover(ctx, at, 0, "rerun after a kill")
			stop()
		}
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now()})
	case invariant.FaultCut:
		p := in.c.mysqlP
		if f.Target == "redis" {
			p = in.c.redisP
		}
		t0 := time.Now()
		p.Cut()
		time.Sleep(f.CutFor)
		p.Restore()
		in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: f.Target})
	}
}

// racingFills starts a burst of fills and returns the function that ends it.
func (in *injector) racingFills(ctx context.Context) func() {
	if in.fills == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { in.fills(ctx) })
	return func() { cancel(); wg.Wait() }
}

// replace starts a web process to take old's place and waits for the new one to hold the lease.
func (in *injector) replace(ctx context.Context, f fault, old *proc) {
	p, err := in.c.start(ctx, "web")
	if err != nil {
		in.fail("%s: replacement web: %v", f.Kind, err)
		return
	}
	if h, err := in.c.waitHolder(ctx, 10*time.Second, old); err != nil {
		in.fail("%s: replacement %s: %v", f.Kind, p.name, err)
	} else if h != p {
		in.fail("%s: %s holds the lease, not the replacement %s", f.Kind, h.name, p.name)
	}
}

// rollover runs processFxSwaps as of at to completion, or SIGKILLs it after killAfter (> 0).
func (in *injector) rollover(ctx context.Context, at time.Time, killAfter time.Duration, why string) invariant.RolloverRun {
	var kill chan struct{}
	if killAfter > 0 {
		kill = make(chan struct{})
		t := time.AfterFunc(killAfter, func() { close(kill) })
		defer t.Stop()
	}
	return in.runRollover(ctx, at, why, kill)
}

// runRollover runs processFxSwaps as of at to completion, or SIGKILLs it once kill is closed
// (nil: never); then it reads the end of day's rows, for eodUnchanged.
func (in *injector) runRollover(ctx context.Context, at time.Time, why string, kill <-chan struct{}) invariant.RolloverRun {
	in.mu.Lock()
	in.runSeq++
	n := in.runSeq
	in.mu.Unlock()
	r := invariant.RolloverRun{At: at, Why: why}
	cmd := exec.CommandContext(ctx, filepath.Join(in.c.binDir, "fxdesk-cron"), "run", "processFxSwaps", "--at", at.Format(time.RFC3339))
	cmd.Env = in.c.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r.Start = time.Now()
	err := cmd.Start()
	if err == nil {
		r.PID = cmd.Process.Pid
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-kill:
			cmd.Process.Kill()
			err = <-done
			r.Killed = true
		}
	}
	r.End = time.Now()
	r.OK = err == nil && !r.Killed
	r.Output = out.String()
	os.WriteFile(filepath.Join(in.c.dir, fmt.Sprintf("rollover%d.log", n)), out.Bytes(), 0o644)
	last := strings.TrimSpace(r.Output)
	if i := strings.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	in.log.Printf("soak: rollover run %d (%s) --at %s: ok=%v killed=%v %s", n, why, at.Format(time.RFC3339), r.OK, r.Killed, invariant.Truncate(last, 200))
	in.mu.Lock()
	in.runs = append(in.runs, r)
	in.mu.Unlock()
	if err := in.eod.read(ctx, in.c.direct, in.c.scope); err != nil {
		in.log.Printf("soak: end of day rows after rollover run %d: %v", n, err)
	}
	return r
}

// simPrice reads symbol's current price from the feed simulator.
func simPrice(p *sim, symbol string) (bid, ask float64, err error) {
	resp, err := httpClient.Get(p.control + "/control/state")
	if err != nil {
		return 0, 0, fmt.Errorf("simulator state on %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	var raw struct {
		Symbols []struct {
			Symbol string  `json:"symbol"`
			Bid    float64 `json:"bid"`
			Ask    float64 `json:"ask"`
		} `json:"symbols"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return 0, 0, fmt.Errorf("simulator state on %s: %w", p.name, err)
	}
	for _, s := range raw.Symbols {
		if s.Symbol == symbol {
			return s.Bid, s.Ask, nil
		}
	}
	return 0, 0, fmt.Errorf("simulator on %s does not quote %s", p.name, symbol)
}

func setSimPrice(p *sim, symbol string, bid, ask float64) error {
	b, _ := json.Marshal(map[string]any{"symbol": symbol, "bid": bid, "ask": ask})
	resp, err := httpClient.Post(p.control+"/control/quote", "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("set %s on %s: %w", symbol, p.name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("set %s on %s: status %d", symbol, p.name, resp.StatusCode)
	}
	return nil
}

// redisLeaseKey reads the Redis lease key (the soak's installs set no FXDESK_REDIS_PREFIX: the
// default names): "" when it is absent, an error only when Redis did not answer.
func (in *injector) redisLeaseKey(ctx context.Context) (string, error) {
	v, _, err := in.redisLeaseKeyTTL(ctx)
	return v, err
}

// redisLeaseKeyTTL is the engine lease's Redis key ("" when absent) and how long it has left to
// live, read in one round trip.
func (in *injector) redisLeaseKeyTTL(ctx context.Context) (string, time.Duration, error) {
	key := redisname.Names{}.EngineLease(lease.Key)
	pipe := in.c.rdb.Pipeline()
	get := pipe.Get(ctx, key)
	ttl := pipe.PTTL(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", 0, err
	}
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return "", 0, nil
	}
	return v, ttl.Val(), err
}
