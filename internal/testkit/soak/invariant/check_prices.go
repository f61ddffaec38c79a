package invariant

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// The price lane's invariants (docs/soak.md, «The price lane»).

// CheckPrices runs the price lane's three invariants; none when the lane did not run.
func CheckPrices(s *Snapshot, ev *Evidence) []Result {
	if ev.Prices == nil {
		return nil
	}
	return []Result{checkFilteredNotActed(s, ev), checkSilentNotQuoted(ev.Prices, ev.Windows), checkCandlesAgree(s, ev.Prices)}
}

// pipOf is symbol's pip: ten points (10^-(digits-1)), 0.0001 (0.01 for a JPY quote) when the
// snapshot has no instrument row.
func (s *Snapshot) pipOf(symbol string) float64 {
	if in, ok := s.Instruments[symbol]; ok && in.Point.IsPositive() {
		return in.Point.InexactFloat64() * 10
	}
	if len(symbol) == 6 && symbol[3:] == "JPY" {
		return 0.01
	}
	return 0.0001
}

// pointOf is symbol's point (a tenth of its pip).
func (s *Snapshot) pointOf(symbol string) float64 { return s.pipOf(symbol) / 10 }

// filteredPrice is a price the desk must not have acted on: a tick it dropped, or a spike the
// soak injected.
type filteredPrice struct {
	what       string
	source     string
	prices     []float64
	tolPips    float64
	start, end time.Time
	// spike: a price the soak injected far off the market. A deal near one is never the
	// market's, even if the desk published it (that is the defect to catch).
	spike bool
}

// act is a price something acted at: a deal, or a hedge order's fill.
type act struct {
	what   string
	symbol string
	price  float64
	at     time.Time
	venue  bool // priced by the venue, not the desk
}

// filteredNotActed: no deal (open, close, stop-out) and no hedge fill is at a price the desk
// filtered. A deal at time t is held against every tick the desk listed as dropped off the
// market (not beside the prices it published, and from a source a price fault moved), and every
// spike the soak injected, in [t − Lookback, t + 1 s] for its symbol: within MatchPips of a
// dropped tick's bid or ask (SpikeMatchPips of a spike's mid) it acted on it. Excused, and
// counted: a deal of a symbol a gap moved in that window (a real move the filter held, dropped
// where it disagreed and published once confirmed, so its prices were both). A venue's execution
// (an EXTERNAL deal, a hedge fill) is judged alike: the venue prices from the market, a feed the
// price lane never faults.
func checkFilteredNotActed(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "filteredNotActed"}
	pe := ev.Prices
	// The prices the desk published, per symbol: a dropped tick can stand at the market — a
	// primary's tick held against a backup that had just gone off-market, a backup's first tick
	// dropped when the primary's first came — and a deal at the market is then near it without
	// being at it. Only a dropped tick off every price published around it is a filtered price.
	published := map[string][]PublishedTick{}
	for _, p := range pe.Published {
		published[p.Symbol] = append(published[p.Symbol], p)
	}
	// nearestPublished is the distance from price to the nearest bid or ask of symbol published
	// from from to to (+Inf when none was heard).
	nearestPublished := func(symbol string, price float64, from, to time.Time) float64 {
		best := math.Inf(1)
		for _, p := range published[symbol] {
			if p.At.Before(from) || p.At.After(to) {
				continue
			}
			best = min(best, math.Abs(price-p.Bid), math.Abs(price-p.Ask))
		}
		return best
	}
	// movedAt reports whether a price fault moved source's price of symbol when a tick received
	// at t left it: an offset of that source, a spike of it on symbol or a gap of symbol, from a
	// second before it began to Backlog after it ended.
	movedAt := func(source, symbol string, t time.Time) bool {
		return slices.ContainsFunc(pe.Faults, func(f PriceFault) bool {
			switch f.Kind {
			case PriceOffset, PriceSpike, PriceGap:
			default:
				return false
			}
			return f.touches(source) && (f.Symbol == "" || f.Symbol == symbol) &&
				!t.Before(f.Start.Add(-time.Second)) && !t.After(f.End.Add(PriceTolerance.Backlog))
		})
	}
	filtered := map[string][]filteredPrice{}
	gaps := map[string][]PriceFault{}
	nDropped, nSpikes, atMarket, unmoved, unreferenced := 0, 0, 0, 0, 0
	for _, f := range pe.Filtered {
		if f.Outcome != "dropped" {
			continue
		}
		if f.Reason == "unreferenced" {
			// Dropped for want of a confirmation (a new holder's first ticks, with nothing
			// published to judge them by), not for standing off the market: nothing to hold a
			// deal against. A spike among them is judged as the soak's injected spike.
			unreferenced++
			continue
		}
		nDropped++
		end := f.DecidedAt
		if end.Before(f.ReceivedAt) {
			end = f.ReceivedAt
		}
		tol := PriceTolerance.MatchPips * s.pipOf(f.Symbol)
		from, to := f.ReceivedAt.Add(-5*time.Second), end.Add(5*time.Second)
		if nearestPublished(f.Symbol, f.Bid, from, to) <= tol && nearestPublished(f.Symbol, f.Ask, from, to) <= tol {
			atMarket++
			continue
		}
		if !movedAt(f.Source, f.Symbol, f.ReceivedAt) {
			// The two sources quote one market seed: a source no fault moved quoted the market,
			// whatever the desk made of it. A new holder whose sources disagree from its first
			// quote publishes nothing for HoldDown and drops this one's ticks as disagreeing, so
			// no published price stands beside them, and a deal at the market is near them
			// without being at a filtered price (docs/soak.md, «The price lane»).
			unmoved++
			continue
		}
		filtered[f.Symbol] = append(filtered[f.Symbol], filteredPrice{what: fmt.Sprintf("%s tick %s/%s dropped (%s)", f.Source, fmtPrice(f.Bid), fmtPrice(f.Ask), f.Reason),
			source: f.Source, prices: []float64{f.Bid, f.Ask}, tolPips: PriceTolerance.MatchPips, start: f.ReceivedAt, end: end})
	}
	for _, f := range pe.Faults {
		switch f.Kind {
		case PriceSpike:
			nSpikes++
			filtered[f.Symbol] = append(filtered[f.Symbol], filteredPrice{what: fmt.Sprintf("%s spike %+g pips to %s", f.Sources[0], f.Pips, fmtPrice(f.Price)),
				source: f.Sources[0], prices: []float64{f.Price}, tolPips: PriceTolerance.SpikeMatchPips, start: f.Start, end: f.End, spike: true})
		case PriceGap:
			gaps[f.Symbol] = append(gaps[f.Symbol], f)
		}
	}
	venueOrder := map[int64]bool{}
	for _, o := range s.Orders {
		venueOrder[o.ID] = o.Execution == "EXTERNAL"
	}
	venuePosition := map[int64]bool{}
	for _, p := range s.Positions {
		venuePosition[p.ID] = venueOrder[p.Order]
	}
	var acts []act
	for _, d := range s.Deals {
		if !d.Symbol.Valid || !d.Price.Valid || !d.Price.Decimal.IsPositive() {
			continue
		}
		acts = append(acts, act{what: fmt.Sprintf("deal %d (%s, account %d)", d.ID, d.Type, d.Account), symbol: d.Symbol.String,
			price: d.Price.Decimal.InexactFloat64(), at: d.CreatedAt, venue: d.Position.Valid && venuePosition[d.Position.Int64]})
	}
	for _, h := range s.HedgeFills {
		acts = append(acts, act{what: fmt.Sprintf("hedge order %d", h.ID), symbol: h.Symbol, price: h.Price.InexactFloat64(), at: h.At, venue: true})
	}
	judged, byGap, byPublished := 0, 0, 0
	for _, a := range acts {
		cands := filtered[a.symbol]
		if len(cands) == 0 {
			continue
		}
		if slices.ContainsFunc(gaps[a.symbol], func(g PriceFault) bool {
			return !a.at.Before(g.Start.Add(-time.Second)) && !a.at.After(g.End.Add(PriceTolerance.Lookback))
		}) {
			byGap++
			continue
		}
		judged++
		pip := s.pipOf(a.symbol)
		for _, c := range cands {
			if c.start.Before(a.at.Add(-PriceTolerance.Lookback)) || c.start.After(a.at.Add(time.Second)) {
				continue
			}
			near := math.Inf(1)
			for _, x := range c.prices {
				near = min(near, math.Abs(a.price-x))
			}
			if near > c.tolPips*pip {
				continue
			}
			// The market can walk to a dropped tick's price within the lookback: a deal the
			// prices published in the 2 s before it explain at least as well is the market's.
			if !c.spike && nearestPublished(a.symbol, a.price, a.at.Add(-2*time.Second), a.at) <= near {
				byPublished++
				break
			}
			r.Add(fmt.Sprintf("%s@%s", a.what, a.symbol), "%s %s at %s at %s: %s at %s (%s)", a.what, a.symbol, fmtPrice(a.price), TimeOfDay(a.at),
				c.what, TimeOfDay(c.start), ev.during(c.start, a.at))
			break
		}
	}
	r.Figures = fmt.Sprintf("%d deals and hedge fills, %d judged against %d dropped ticks off the published prices (%d more stood at them, %d from a source no price fault moved, %d unreferenced not judged) and %d injected spikes (±%g/%g pips, %s back); excused: %d in a gap's window, %d as near a price published in the 2 s before",
		len(acts), judged, nDropped-atMarket-unmoved, atMarket, unmoved, unreferenced, nSpikes, PriceTolerance.MatchPips, PriceTolerance.SpikeMatchPips, PriceTolerance.Lookback, byGap, byPublished)
	return r
}

// silentNotQuoted: no symbol is quoted from a silent primary past its threshold while the backup
// was healthy. For each primarySilent fault (the primary's socket up, nothing sent) and each
// primaryDown fault (every socket dropped, again and again), each sample of the holder's selection
// taken from threshold + Failover after the fault began to its end must not name the primary —
// the threshold is the SilentAfter the desk reported for the primary (at most SilentCap) for a
// silence, 0 for a disconnect. Judged only while no fault touched the backup (from 2 s before the
// fault to the sample): then it was healthy by the run's timeline; and not in a holder's first
// WarmUp (a new engine has no quote yet, and starts on the primary).
func checkSilentNotQuoted(pe *PriceEvidence, windows []Window) Result {
	r := Result{Name: "silentNotQuoted"}
	// A process frozen (SIGSTOP) and let go reads its sockets' backlog as it wakes, every tick
	// stamped with its own clock: a silent primary's last ticks look fresh for one threshold more
	// (seed 1050127133: the woken process switched back to the primary, "backup silent").
	resumed := func(pid int, at time.Time) bool {
		return slices.ContainsFunc(windows, func(w Window) bool {
			return (w.Kind == FaultStop || w.Kind == FaultZombie) && w.PID == pid && !at.Before(w.Start) &&
				at.Before(w.End.Add(PriceTolerance.SilentCap+PriceTolerance.Failover))
		})
	}
	woken := 0
	faults, judged := 0, 0
	var slowest time.Duration
	firstSeen := map[int]time.Time{}
	for _, smp := range pe.Selections {
		if t, ok := firstSeen[smp.PID]; !ok || smp.Sent.Before(t) {
			firstSeen[smp.PID] = smp.Sent
		}
	}
	for _, f := range pe.Faults {
		if f.Kind != PricePrimarySilent && f.Kind != PricePrimaryDown {
			continue
		}
		faults++
		backupTouched := func(until time.Time) bool {
			return slices.ContainsFunc(pe.Faults, func(g PriceFault) bool {
				return g.touches(SourceBackup) && !g.Start.After(until) && !g.End.Before(f.Start.Add(-2*time.Second))
			})
		}
		var firstOff time.Time // the first sample with no symbol on the primary
		onPrimary := map[time.Time]bool{}
		for _, smp := range pe.Selections {
			if smp.Sent.Before(f.Start) || smp.Recv.After(f.End) {
				continue
			}
			if smp.Source == SourcePrimary {
				onPrimary[smp.Sent] = true
			} else if _, ok := onPrimary[smp.Sent]; !ok {
				onPrimary[smp.Sent] = false
			}
			// A holder's first moments: its engine starts on the primary until a first quote.
			if smp.Source != SourcePrimary || backupTouched(smp.Recv) || smp.Sent.Before(firstSeen[smp.PID].Add(PriceTolerance.WarmUp)) {
				continue
			}
			threshold := time.Duration(0)
			if f.Kind == PricePrimarySilent {
				threshold = PriceTolerance.SilentCap
				for _, h := range smp.Health {
					if h.Source == SourcePrimary && h.SilentAfter > 0 {
						threshold = min(h.SilentAfter, PriceTolerance.SilentCap)
					}
				}
			}
			if smp.Sent.Before(f.Start.Add(threshold + PriceTolerance.Failover)) {
				continue
			}
			if resumed(smp.PID, smp.Sent) {
				woken++
				continue
			}
			judged++
			r.Add(fmt.Sprintf("%s@%s %s", f.Kind, TimeOfDay(f.Start), smp.Symbol), "%s quoted from the primary at %s–%s, %s into %s (%s–%s; threshold %s + %s), the backup untouched",
				smp.Symbol, TimeOfDay(smp.Sent), TimeOfDay(smp.Recv), smp.Sent.Sub(f.Start).Round(time.Millisecond), f.Kind, TimeOfDay(f.Start), TimeOfDay(f.End), threshold, PriceTolerance.Failover)
		}
		if backupTouched(f.End) {
			continue
		}
		for _, at := range sortedTimes(onPrimary) {
			if !onPrimary[at] {
				firstOff = at
				break
			}
		}
		if !firstOff.IsZero() {
			slowest = max(slowest, firstOff.Sub(f.Start))
		}
	}
	r.Figures = fmt.Sprintf("%d silent or down primaries, %d selection samples, %d on the primary past its threshold (%d more from a process just woken from a stop); slowest failover seen %s (tolerance: threshold + %s, threshold ≤ %s)",
		faults, len(pe.Selections), judged, woken, slowest.Round(time.Millisecond), PriceTolerance.Failover, PriceTolerance.SilentCap)
	return r
}

func sortedTimes(m map[time.Time]bool) []time.Time {
	out := make([]time.Time, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// candlesAgree: every published tick the soak heard lies within its minute's M1 candle, bid
// within the bid low and high, ask within the ask's (half a point of rounding either side). A tick
// within Edge of a minute's edge may be in either candle; a tick within Flush of its term's last
// heard tick (its holder may have died with the batch) or of the snapshot is not judged yet.
func checkCandlesAgree(s *Snapshot, pe *PriceEvidence) Result {
	r := Result{Name: "candlesAgree"}
	if !s.CandlesRead {
		r.Add("", "fx_candle not readable: %s", s.CandlesErr)
		return r
	}
	lastOf := map[int64]time.Time{}
	var lastTerm int64
	for _, t := range pe.Published {
		if t.At.After(lastOf[t.Term]) {
			lastOf[t.Term] = t.At
		}
		lastTerm = max(lastTerm, t.Term)
	}
	judged, outside, missing := 0, 0, 0
	for _, t := range pe.Published {
		if t.At.After(s.Taken.Add(-PriceTolerance.Flush)) || (t.Term != lastTerm && t.At.After(lastOf[t.Term].Add(-PriceTolerance.Flush))) {
			continue
		}
		judged++
		m := t.At.Truncate(time.Minute)
		minutes := []time.Time{m}
		if t.At.Sub(m) < PriceTolerance.Edge {
			minutes = append(minutes, m.Add(-time.Minute))
		}
		if m.Add(time.Minute).Sub(t.At) < PriceTolerance.Edge {
			minutes = append(minutes, m.Add(time.Minute))
		}
		eps := s.pointOf(t.Symbol) / 2
		found, inside := false, false
		var near dbCandle
		for _, mm := range minutes {
			c, ok := s.Candles[candleKey(t.Symbol, mm)]
			if !ok {
				continue
			}
			if !found {
				near = c
			}
			found = true
			if within(t.Bid, c.BidLow.InexactFloat64(), c.BidHigh.InexactFloat64(), eps) && within(t.Ask, c.AskLow.InexactFloat64(), c.AskHigh.InexactFloat64(), eps) {
				inside = true
				break
			}
		}
		switch {
		case !found:
			missing++
			r.Add(candleKey(t.Symbol, m), "%s %s: no M1 candle, yet the desk published %s/%s at %s (term %d)", t.Symbol, m.UTC().Format("15:04"), fmtPrice(t.Bid), fmtPrice(t.Ask), TimeOfDay(t.At), t.Term)
		case !inside:
			outside++
			r.Add(candleKey(t.Symbol, m), "%s %s: published %s/%s at %s (term %d) outside the candle bid %s–%s ask %s–%s (%d ticks)", t.Symbol, m.UTC().Format("15:04"),
				fmtPrice(t.Bid), fmtPrice(t.Ask), TimeOfDay(t.At), t.Term, near.BidLow, near.BidHigh, near.AskLow, near.AskHigh, near.Ticks)
		}
	}
	r.Figures = fmt.Sprintf("%d published ticks heard, %d judged against %d M1 candles: %d outside, %d with no candle (edge ±%s, flush %s)",
		len(pe.Published), judged, len(s.Candles), outside, missing, PriceTolerance.Edge, PriceTolerance.Flush)
	return r
}

func candleKey(symbol string, open time.Time) string {
	return symbol + " " + open.UTC().Format(time.RFC3339)
}

func within(v, lo, hi, eps float64) bool { return v >= lo-eps && v <= hi+eps }

func fmtPrice(v float64) string { return fmt.Sprintf("%.6g", v) }
