package invariant

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/swaps"
)

// swapDate is the rollover date of a SWAP deal's key swap:<position>:<date>.
func swapDate(d dbDeal) (int64, string, bool) {
	parts := strings.Split(d.Key, ":")
	if d.Type != "SWAP" || len(parts) != 3 || parts[0] != "swap" {
		return 0, "", false
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	return id, parts[2], err == nil
}

// One swap charge per position and rollover date: one deal per key, and a pending row never
// beside a deal for the same date unless it says CHARGED.
func checkSwapUnique(s *Snapshot) Result {
	r := Result{Name: "swapOnce"}
	type key struct {
		pos  int64
		date string
	}
	deals := map[key][]int64{}
	for _, d := range s.Deals {
		if id, date, ok := swapDate(d); ok {
			k := key{id, date}
			deals[k] = append(deals[k], d.ID)
			if d.Position.Valid && d.Position.Int64 != id {
				r.Add("", "deal %d key %s on position %d", d.ID, d.Key, d.Position.Int64)
			}
		}
	}
	for k, ids := range deals {
		if len(ids) > 1 {
			r.Add("", "position %d date %s: swap deals %v", k.pos, k.date, ids)
		}
	}
	for _, c := range s.Charges {
		if c.Status == "PENDING" && len(deals[key{c.Position, c.Date}]) > 0 {
			r.Add("", "position %d date %s: pending charge beside swap deal %v", c.Position, c.Date, deals[key{c.Position, c.Date}])
		}
	}
	r.Figures = fmt.Sprintf("%d swap deals, %d charge rows", len(deals), len(s.Charges))
	return r
}

// Every due rollover charged: a run that completed as of --at A settled every rollover due at A
// (DueRollovers, the last 7 days) for every position open throughout the run that was open at
// that rollover's instant — a SWAP deal or a pending charge row for that date.
func checkRolloversDue(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "rolloversDue"}
	type key struct {
		pos  int64
		date string
	}
	have := map[key]bool{}
	for _, d := range s.Deals {
		if id, date, ok := swapDate(d); ok {
			have[key{id, date}] = true
		}
	}
	for _, c := range s.Charges {
		have[key{c.Position, c.Date}] = true
	}
	appeared := positionsWritten(s)
	checked, runs := 0, 0
	missing := map[key]bool{}
	for i, run := range ev.Runs {
		if !run.OK || run.End.After(s.Taken) {
			continue
		}
		runs++
		due, err := swaps.DueRollovers(run.At, swaps.DefaultExpireAfter)
		if err != nil {
			r.Add("rollover zone", "the rollover dates of run %d cannot be worked out: %v", i+1, err)
			continue
		}
		for _, p := range s.Positions {
			// Open throughout the run, with a second of slack for the two clocks.
			from := appeared[p.ID]
			if !from.Before(run.Start.Add(-time.Second)) || (p.ClosedAt.Valid && p.ClosedAt.Time.Before(run.End.Add(time.Second))) {
				continue
			}
			for _, ro := range due {
				if !p.OpenedAt.Before(ro.At) {
					continue
				}
				checked++
				k := key{p.ID, ro.Date}
				if have[k] || missing[k] {
					continue
				}
				missing[k] = true
				through := "NULL"
				if p.SwapThrough.Valid {
					through = p.SwapThrough.Time.Format("2006-01-02")
				}
				r.Add(fmt.Sprintf("due %d %s", p.ID, ro.Date), "position %d (%s %s %s lots opened %s, now %s) has no charge for %s although run %d (--at %s, %s–%s, %s) completed while it was open; its watermark swapThrough=%s",
					p.ID, p.Symbol, p.Side, p.OpenVolume, p.OpenedAt.Format(time.RFC3339Nano), p.Status, ro.Date, i+1, run.At.Format(time.RFC3339), TimeOfDay(run.Start), TimeOfDay(run.End), run.Why, through)
			}
		}
	}
	// No gaps, whatever ran when: a position charged for date D was charged for every earlier
	// weekday rollover it was open at. A run charges all of a position's due dates in the pass
	// that first sees it, so the watermark never moves past an uncharged date.
	last := map[int64]string{}
	for k := range have {
		if k.date > last[k.pos] {
			last[k.pos] = k.date
		}
	}
	gaps := 0
	for _, p := range s.Positions {
		latest, ok := last[p.ID]
		if !ok {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02", latest, time.UTC)
		if err != nil {
			continue
		}
		// The latest charged date's rollover instant is 17:00 New York, at most 22:00 UTC.
		before, err := swaps.DueRollovers(at.Add(23*time.Hour), swaps.DefaultExpireAfter)
		if err != nil {
			r.Add("rollover zone", "the rollover dates before %s cannot be worked out: %v", latest, err)
			continue
		}
		for _, ro := range before {
			k := key{p.ID, ro.Date}
			if ro.Date >= latest || !p.OpenedAt.Before(ro.At) || have[k] || missing[k] {
				continue
			}
			gaps++
			missing[k] = true
			r.Add(fmt.Sprintf("due %d %s", p.ID, ro.Date), "position %d (%s %s, opened %s) was charged for %s but never for %s, a rollover it was open at: %s",
				p.ID, p.Symbol, p.Side, p.OpenedAt.Format(time.RFC3339Nano), latest, ro.Date, chargedDates(p.ID, s))
		}
	}
	r.Figures = fmt.Sprintf("%d completed runs, %d position-dates due, %d uncharged after a completed run, %d skipped dates", runs, checked, len(missing)-gaps, gaps)
	return r
}

// chargedDates lists a position's swap deals and charge rows, for the evidence.
func chargedDates(pos int64, s *Snapshot) string {
	var out []string
	for _, d := range s.Deals {
		if id, date, ok := swapDate(d); ok && id == pos {
			out = append(out, fmt.Sprintf("deal %d %s %s at %s", d.ID, date, d.Amount, d.CreatedAt.Format("15:04:05.000")))
		}
	}
	for _, c := range s.Charges {
		if c.Position == pos {
			out = append(out, "charge row "+c.Date+" "+c.Status)
		}
	}
	return strings.Join(out, "; ")
}

// Swaps converted at a price the live holder quoted: a SWAP deal on a JPY-quoted position in a
// USD account is amountQuote ÷ a USDJPY mid; that mid, read back from the rounded amount, must
// be in a snapshot the mirror held while a run that may have written it read it, published by a
// holder whose term was still live (publishedLive; a holder granted by Redis alone publishes term
// 0, held to the row term it came after) — never a replaced holder's.
//
// A deal names no run, so every run that was going when it was written may have written it: a
// concurrent pair, a killed run and its rerun a second later, and fxdesk-cron's own hourly run
// (ScheduledSwapRuns), which charges the pending charges the soak's runs parked at its follower's
// mids. The deal holds when one of them saw a matching live mid. (The check once judged a deal
// by the last run alone: a deal of the other run of a pair, or of the hourly run, was judged
// against mids read seconds away from its own, and flagged 0.01–0.02 USD off.)
func checkSwapConversion(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "swapPrice"}
	rows := sortedRows(ev.Rows)
	rowTerm := rowTerms(rows, ev.Mirrors)
	pos := map[int64]dbPosition{}
	for _, p := range s.Positions {
		pos[p.ID] = p
	}
	verified, unverifiable := 0, 0
	for _, d := range s.Deals {
		id, date, ok := swapDate(d)
		if !ok {
			continue
		}
		p, ok := pos[id]
		in, ok2 := s.Instruments[p.Symbol]
		if !ok || !ok2 || in.Quote != "JPY" || d.Amount.IsZero() {
			continue
		}
		points := in.SwapLong
		if p.Side == "SELL" {
			points = in.SwapShort
		}
		days := int64(1)
		if i := strings.LastIndex(d.Comment, " x"); i >= 0 {
			days, _ = strconv.ParseInt(d.Comment[i+2:], 10, 64)
		}
		aq := d.Volume.Decimal.Mul(in.Contract).Mul(points).Mul(in.Point).Mul(decimal.NewFromInt(days)).Abs().InexactFloat64()
		amt := d.Amount.Abs().InexactFloat64()
		lo, hi := aq/(amt+0.005)*(1-1e-4), math.Inf(1)
		if amt > 0.005 {
			hi = aq / (amt - 0.005) * (1 + 1e-4)
		}
		reads := swapReads(d, ev)
		if len(reads) == 0 {
			unverifiable++
			continue
		}
		var live, other []string
		listed := map[string]bool{}
		match := false
		for _, m := range ev.Mirrors {
			if !m.Present || !readDuring(reads, m.At) {
				continue
			}
			mid, ok := m.Mids["USDJPY"]
			if !ok {
				continue
			}
			desc := fmt.Sprintf("%.3f(term %d published %s)", mid, m.Term, m.PublishedAt)
			fromLive, _ := publishedLive(rows, m, rowTerm(m))
			if fromLive && mid >= lo && mid <= hi {
				match = true
			}
			if listed[desc] { // sampled more than once
				continue
			}
			listed[desc] = true
			if fromLive {
				live = append(live, desc)
			} else {
				other = append(other, desc)
			}
		}
		if len(live) == 0 && len(other) == 0 {
			unverifiable++
			continue
		}
		verified++
		if !match {
			r.Add(fmt.Sprintf("price %d", d.ID), "deal %d (position %d %s %s %s, %s, amount %s) converted at USDJPY %.3f–%.3f; live holder's mids then: %s; other terms' mids: %s; written %s by one of: %s",
				d.ID, p.ID, p.Symbol, p.Side, d.Volume.Decimal, date, d.Amount, lo, hi, list(live), list(other), TimeOfDay(d.CreatedAt), describeReads(reads))
		}
	}
	r.Figures = fmt.Sprintf("%d JPY-quoted swap deals checked against the live mirror, %d without mirror samples", verified, unverifiable)
	return r
}

// swapRead is when a run that may have written a SWAP deal may have read the mirror's snapshot
// it converted at: mirror samples taken from..to may show it.
type swapRead struct {
	from, to time.Time
	run      RolloverRun
}

// swapReads are the reads of every run going (with a second of slack for the two clocks) when
// deal d was written, the soak's one-off runs and fxdesk-cron's scheduled ones.
func swapReads(d dbDeal, ev *Evidence) []swapRead {
	var out []swapRead
	going := func(r RolloverRun) bool {
		return !d.CreatedAt.Before(r.Start.Add(-time.Second)) && !d.CreatedAt.After(r.End.Add(time.Second))
	}
	for _, run := range ev.Runs {
		if !going(run) {
			continue
		}
		// The one-off run reads the snapshot once, right before its job starts; that snapshot was
		// published at most one interval before. The process may take well over a second to
		// reach its job beside a loaded desk, so the window runs to the job's start; for a run
		// killed before its job line, to the deal itself, which it wrote after that read (seed
		// 237868095786120: a killed run reached its job 3 s after its start and read the live
		// holder's mids then).
		readBy, ok := run.jobStarted()
		if !ok {
			readBy = d.CreatedAt
		}
		out = append(out, swapRead{from: run.Start.Add(-MirrorInterval - 1500*time.Millisecond), to: readBy.Add(time.Second), run: run})
	}
	for _, run := range ev.ScheduledSwaps {
		if !going(run) {
			continue
		}
		// The scheduled run converts at its follower's view when it first converts, after its
		// start and before the deal: a snapshot polled at most an interval before — or, while
		// Redis was cut, the last one polled before the cut.
		from := run.Start.Add(-MirrorInterval - 1500*time.Millisecond)
		for _, w := range ev.Windows {
			if (w.Kind == FaultCut && w.Note == "redis" || w.Kind == FaultSentinelFailover) && !w.Start.After(d.CreatedAt) && !w.End.Before(from) {
				from = minTime(from, w.Start.Add(-MirrorInterval-1500*time.Millisecond))
			}
		}
		out = append(out, swapRead{from: from, to: d.CreatedAt.Add(time.Second), run: run})
	}
	return out
}

func readDuring(reads []swapRead, at time.Time) bool {
	for _, r := range reads {
		if !at.Before(r.from) && !at.After(r.to) {
			return true
		}
	}
	return false
}

func describeReads(reads []swapRead) string {
	var out []string
	for _, r := range reads {
		out = append(out, fmt.Sprintf("%s run as of %s (%s–%s)", r.run.Why, r.run.At.Format(time.RFC3339), TimeOfDay(r.run.Start), TimeOfDay(r.run.End)))
	}
	return strings.Join(out, ", ")
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 6 {
		return strings.Join(s[:6], " ") + fmt.Sprintf(" … (%d)", len(s))
	}
	return strings.Join(s, " ")
}

// positionsWritten is when each position appeared in the database: its openedAt, or the commit
// of its position.opened event where that is later — an adopted or venue-filled position opens at
// the venue's time, which can be well before the desk wrote it (a holder killed between the
// venue's fill and the desk's write, the reconciler adopting it later).
func positionsWritten(s *Snapshot) map[int64]time.Time {
	written := map[int64]time.Time{}
	for _, p := range s.Positions {
		written[p.ID] = p.OpenedAt
	}
	for _, e := range s.Events {
		if e.Type != "position.opened" {
			continue
		}
		var v struct {
			ID int64 `json:"id"`
		}
		if json.Unmarshal([]byte(e.Payload), &v) == nil && e.CreatedAt.After(written[v.ID]) {
			written[v.ID] = e.CreatedAt
		}
	}
	return written
}
