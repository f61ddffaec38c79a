package main

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
	"fxdesk/internal/swaps"
)

// result is one invariant's verdict on one check: its figures, and the rows that break it.
type result struct {
	Name       string
	Figures    string
	Violations []violation
}

// violation is one row that breaks an invariant. Key names the row across checks (its text may
// grow with later evidence); an empty key means the text itself.
type violation struct {
	Key, Text string
}

func (r *result) add(key, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if key == "" {
		key = text
	}
	r.Violations = append(r.Violations, violation{key, text})
}

// evidence is what the checks read besides the database.
type evidence struct {
	journal []entry
	procs   map[int]*proc // by pid
	desks   []deskSample
	rows    []rowSample
	mirrors []mirrorSample
	runs    []rolloverRun
	windows []window
	// venue is the venue simulator's state read with the snapshot (nil: unreadable then);
	// external names the clients trading on the EXTERNAL account group.
	venue    *venueState
	external map[string]bool
	// floods and reuses are what the front-door faults saw.
	floods []floodRun
	reuses []reuse
}

// during names the fault windows that overlap [a, b], for reading a violation.
func (ev *evidence) during(a, b time.Time) string {
	var names []string
	for _, w := range ev.windows {
		if !w.Start.After(b.Add(2*time.Second)) && !w.End.Before(a.Add(-2*time.Second)) {
			names = append(names, w.Kind+"@"+w.Start.Format("15:04:05.000"))
		}
	}
	if len(names) == 0 {
		return "no fault"
	}
	return "during " + strings.Join(names, ",")
}

func ts(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// checkAll runs every invariant on one snapshot and the evidence gathered up to it.
func checkAll(s *dbSnapshot, ev *evidence) []result {
	rs := []result{
		checkLedger(s),
		checkPositions(s, ev),
		checkNonces(s, ev),
		checkSwapUnique(s),
		checkRolloversDue(s, ev),
		checkSwapConversion(s, ev),
		checkMirrorTerm(ev),
		checkLeaseTerms(ev),
		checkSingleTrust(ev),
		checkAnswersInDB(s, ev),
		checkFencedInTerm(ev),
		checkNo5xx(ev),
		checkFlood(s, ev),
		checkReusedNonce(s, ev),
		checkLoadNotLimited(ev),
	}
	if ev.venue != nil {
		rs = append(rs, checkVenueNeverResent(ev.venue))
	}
	return rs
}

// Σ deals = balance, and each deal's balanceAfter is the previous one's plus its amount, in deal
// id order within the account: every writer locks the account row before it inserts the deal,
// so ids within one account follow commit order.
func checkLedger(s *dbSnapshot) result {
	r := result{Name: "ledger"}
	by := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		by[d.Account] = append(by[d.Account], d)
	}
	for _, a := range s.Accounts {
		sum := decimal.Zero
		for _, d := range by[a.ID] {
			want := sum.Add(d.Amount)
			if !d.BalanceAfter.Equal(want) {
				r.add("", "account %d deal %d (%s %s, key %s): balanceAfter %s, previous %s + amount = %s",
					a.ID, d.ID, d.Type, d.Amount, d.Key, d.BalanceAfter, sum, want)
			}
			sum = want
		}
		if !sum.Equal(a.Balance) {
			r.add("", "account %d: Σ %d deals = %s, balance = %s", a.ID, len(by[a.ID]), sum, a.Balance)
		}
	}
	r.Figures = fmt.Sprintf("%d accounts, %d deals", len(s.Accounts), len(s.Deals))
	return r
}

// No position closed twice, closed volume ≤ opened, and the position row agrees with its close
// deals; two concurrent full closes of one position never both succeed.
func checkPositions(s *dbSnapshot, ev *evidence) result {
	r := result{Name: "positions"}
	closes := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && strings.HasPrefix(d.Key, "close:") {
			closes[d.Position.Int64] = append(closes[d.Position.Int64], d)
		}
	}
	closed := 0
	for _, p := range s.Positions {
		left := p.OpenVolume
		for _, d := range closes[p.ID] { // id order
			before, _ := decimal.NewFromString(d.Key[strings.LastIndexByte(d.Key, ':')+1:])
			if left.IsZero() {
				r.add("", "position %d closed again after it was fully closed: deal %d volume %s", p.ID, d.ID, d.Volume.Decimal)
			} else if !before.Equal(left) {
				r.add("", "position %d deal %d closed %s from %s, but %s was open", p.ID, d.ID, d.Volume.Decimal, before, left)
			}
			left = left.Sub(d.Volume.Decimal)
		}
		switch {
		case left.IsNegative():
			r.add("", "position %d (%s): closed %s of %s opened", p.ID, p.Symbol, p.OpenVolume.Sub(left), p.OpenVolume)
		case !left.Equal(p.Volume):
			r.add("", "position %d: volume %s, but opened %s minus its close deals is %s", p.ID, p.Volume, p.OpenVolume, left)
		case (p.Status == "CLOSED") != p.Volume.IsZero():
			r.add("", "position %d: status %s with volume %s", p.ID, p.Status, p.Volume)
		}
		if p.Status == "CLOSED" {
			closed++
		}
	}
	// The two halves of a race are journaled one after the other by one client.
	type raceKey struct {
		client, path string
	}
	wins := map[raceKey][]entry{}
	races := 0
	for _, e := range ev.journal {
		if e.Op == "raceClose" {
			races++
			if e.ok() {
				k := raceKey{e.Client, e.Path}
				wins[k] = append(wins[k], e)
			}
		}
	}
	for k, es := range wins {
		// Successive races of one position are impossible: the first full close ends it.
		if len(es) > 1 {
			r.add("", "%s %s: %d concurrent full closes answered 2xx (journal seq %d and %d)", k.client, k.path, len(es), es[0].Seq, es[1].Seq)
		}
	}
	r.Figures = fmt.Sprintf("%d positions (%d closed), %d close deals, %d race halves", len(s.Positions), closed, countDeals(closes), races)
	return r
}

func countDeals(m map[int64][]dbDeal) int {
	n := 0
	for _, ds := range m {
		n += len(ds)
	}
	return n
}

// One order per requestNonce, and every 2xx answer for one nonce names the same order.
func checkNonces(s *dbSnapshot, ev *evidence) result {
	r := result{Name: "nonces"}
	type key struct {
		account int64
		nonce   string
	}
	seen := map[key][]int64{}
	for _, o := range s.Orders {
		if o.Nonce.Valid {
			k := key{o.Account, o.Nonce.String}
			seen[k] = append(seen[k], o.ID)
		}
	}
	for k, ids := range seen {
		if len(ids) > 1 {
			r.add("", "account %d nonce %s: orders %v", k.account, k.nonce, ids)
		}
	}
	answers := map[string]map[int64]bool{}
	retried := 0
	for _, e := range ev.journal {
		if !strings.HasPrefix(e.Op, "open") || !e.ok() {
			continue
		}
		if e.Op == "open-retry" {
			retried++
		}
		var b struct {
			Order struct {
				ID           int64  `json:"id"`
				RequestNonce string `json:"requestNonce"`
			} `json:"order"`
		}
		if e.decode(&b) {
			if answers[b.Order.RequestNonce] == nil {
				answers[b.Order.RequestNonce] = map[int64]bool{}
			}
			answers[b.Order.RequestNonce][b.Order.ID] = true
		}
	}
	for n, ids := range answers {
		if len(ids) > 1 {
			r.add("", "nonce %s answered with orders %v", n, keys(ids))
		}
	}
	r.Figures = fmt.Sprintf("%d orders, %d nonces, %d retried opens answered 2xx", len(s.Orders), len(seen), retried)
	return r
}

func keys(m map[int64]bool) []int64 {
	var out []int64
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

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
func checkSwapUnique(s *dbSnapshot) result {
	r := result{Name: "swapOnce"}
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
				r.add("", "deal %d key %s on position %d", d.ID, d.Key, d.Position.Int64)
			}
		}
	}
	for k, ids := range deals {
		if len(ids) > 1 {
			r.add("", "position %d date %s: swap deals %v", k.pos, k.date, ids)
		}
	}
	for _, c := range s.Charges {
		if c.Status == "PENDING" && len(deals[key{c.Position, c.Date}]) > 0 {
			r.add("", "position %d date %s: pending charge beside swap deal %v", c.Position, c.Date, deals[key{c.Position, c.Date}])
		}
	}
	r.Figures = fmt.Sprintf("%d swap deals, %d charge rows", len(deals), len(s.Charges))
	return r
}

// Every due rollover charged: a run that completed as of --at A settled every rollover due at A
// (DueRollovers, the last 7 days) for every position open throughout the run that was open at
// that rollover's instant — a SWAP deal or a pending charge row for that date.
func checkRolloversDue(s *dbSnapshot, ev *evidence) result {
	r := result{Name: "rolloversDue"}
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
	checked, runs := 0, 0
	missing := map[key]bool{}
	for i, run := range ev.runs {
		if !run.OK || run.End.After(s.Taken) {
			continue
		}
		runs++
		due, err := swaps.DueRollovers(run.At, swaps.DefaultExpireAfter)
		if err != nil {
			r.add("rollover zone", "the rollover dates of run %d cannot be worked out: %v", i+1, err)
			continue
		}
		for _, p := range s.Positions {
			// Open throughout the run, with a second of slack for the two clocks.
			if !p.OpenedAt.Before(run.Start.Add(-time.Second)) || (p.ClosedAt.Valid && p.ClosedAt.Time.Before(run.End.Add(time.Second))) {
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
				r.add(fmt.Sprintf("due %d %s", p.ID, ro.Date), "position %d (%s %s %s lots opened %s, now %s) has no charge for %s although run %d (--at %s, %s–%s, %s) completed while it was open; its watermark swapThrough=%s",
					p.ID, p.Symbol, p.Side, p.OpenVolume, p.OpenedAt.Format(time.RFC3339Nano), p.Status, ro.Date, i+1, run.At.Format(time.RFC3339), ts(run.Start), ts(run.End), run.Why, through)
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
			r.add("rollover zone", "the rollover dates before %s cannot be worked out: %v", latest, err)
			continue
		}
		for _, ro := range before {
			k := key{p.ID, ro.Date}
			if ro.Date >= latest || !p.OpenedAt.Before(ro.At) || have[k] || missing[k] {
				continue
			}
			gaps++
			missing[k] = true
			r.add(fmt.Sprintf("due %d %s", p.ID, ro.Date), "position %d (%s %s, opened %s) was charged for %s but never for %s, a rollover it was open at: %s",
				p.ID, p.Symbol, p.Side, p.OpenedAt.Format(time.RFC3339Nano), latest, ro.Date, chargedDates(p.ID, s))
		}
	}
	r.Figures = fmt.Sprintf("%d completed runs, %d position-dates due, %d uncharged after a completed run, %d skipped dates", runs, checked, len(missing)-gaps, gaps)
	return r
}

// chargedDates lists a position's swap deals and charge rows, for the evidence.
func chargedDates(pos int64, s *dbSnapshot) string {
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

// publishedLive reports whether snapshot m was published by a holder whose term was still the
// lease's: the row read one sampling period before its publishedAt (surely before the publish)
// had no newer term. A snapshot from a process that had already been replaced is a zombie's.
func publishedLive(rows []rowSample, m mirrorSample) (bool, int64) {
	at, err := time.Parse(time.RFC3339Nano, m.PublishedAt)
	if err != nil {
		return false, 0
	}
	lt := liveTerm(rows, at.Add(-sampleEvery))
	return m.Term >= lt, lt
}

// liveTerm is the lease row's term as last read at or before t (0 when unknown).
func liveTerm(rows []rowSample, t time.Time) int64 {
	i := sort.Search(len(rows), func(i int) bool { return rows[i].At.After(t) })
	for i--; i >= 0; i-- {
		if rows[i].Err == "" && rows[i].OK {
			return rows[i].Row.Term
		}
	}
	return 0
}

// Swaps converted at a price the live holder quoted: a SWAP deal on a JPY-quoted position in a
// USD account is amountQuote ÷ a USDJPY mid; that mid, read back from the rounded amount, must
// be in a snapshot the mirror held while the run that wrote it read it, published by a holder
// whose term was still live (publishedLive) — never a replaced holder's.
func checkSwapConversion(s *dbSnapshot, ev *evidence) result {
	r := result{Name: "swapPrice"}
	rows := sortedRows(ev.rows)
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
		var run *rolloverRun
		for i := range ev.runs {
			if !d.CreatedAt.Before(ev.runs[i].Start.Add(-time.Second)) && !d.CreatedAt.After(ev.runs[i].End.Add(time.Second)) {
				run = &ev.runs[i]
			}
		}
		if run == nil {
			unverifiable++
			continue
		}
		// The one-off run reads the snapshot once, at its start; that snapshot was published at
		// most one interval before.
		from, to := run.Start.Add(-mirrorInterval-1500*time.Millisecond), run.Start.Add(time.Second)
		var live, other []string
		listed := map[string]bool{}
		match := false
		for _, m := range ev.mirrors {
			if m.At.Before(from) || m.At.After(to) || !m.Present {
				continue
			}
			mid, ok := m.Mids["USDJPY"]
			if !ok {
				continue
			}
			desc := fmt.Sprintf("%.3f(term %d published %s)", mid, m.Term, m.PublishedAt)
			fromLive, _ := publishedLive(rows, m)
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
			r.add(fmt.Sprintf("price %d", d.ID), "deal %d (position %d %s %s %s, %s, amount %s) converted at USDJPY %.3f–%.3f; live holder's mids then: %s; other terms' mids: %s",
				d.ID, p.ID, p.Symbol, p.Side, d.Volume.Decimal, date, d.Amount, lo, hi, list(live), list(other))
		}
	}
	r.Figures = fmt.Sprintf("%d JPY-quoted swap deals checked against the live mirror, %d without mirror samples", verified, unverifiable)
	return r
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

func sortedRows(rows []rowSample) []rowSample {
	out := append([]rowSample(nil), rows...)
	sort.Slice(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// Only the live holder's snapshots in the mirror: the snapshot's term never goes backwards, no
// snapshot was published after its term was replaced in the lease row, and within one publish
// interval (plus sampling slack) of a new term in the lease row, the snapshot
// carries it — unless Redis was cut meanwhile, when nobody can publish.
func checkMirrorTerm(ev *evidence) result {
	r := result{Name: "mirrorTerm"}
	rows := sortedRows(ev.rows)
	ms := append([]mirrorSample(nil), ev.mirrors...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].At.Before(ms[j].At) })
	var maxTerm int64
	var maxAt time.Time
	backwards, stale, zombie := 0, 0, 0
	lastZombie := ""
	var episode *mirrorSample
	present := 0
	// since is when the row first showed term t.
	since := func(t int64) time.Time {
		for _, rs := range rows {
			if rs.OK && rs.Row.Term >= t {
				return rs.At
			}
		}
		return time.Time{}
	}
	redisCut := func(a, b time.Time) bool {
		for _, w := range ev.windows {
			if w.Kind == faultCut && w.Note == "redis" && !w.Start.After(b) && !w.End.Before(a) {
				return true
			}
		}
		return false
	}
	for i := range ms {
		m := ms[i]
		if !m.Present {
			continue
		}
		present++
		if m.Term < maxTerm {
			backwards++
			if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
				r.add("", "snapshot term went back from %d (seen %s) to %d at %s (publishedAt %s, USDJPY %.3f): an older holder published after a newer one",
					maxTerm, ts(maxAt), m.Term, ts(m.At), m.PublishedAt, m.Mids["USDJPY"])
				episode = &ms[i]
			}
			continue
		}
		if ok, lt := publishedLive(rows, m); !ok && m.PublishedAt != lastZombie {
			zombie++
			lastZombie = m.PublishedAt
			if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
				r.add("", "snapshot of term %d published at %s, when the lease row already had term %d (USDJPY %.3f, read %s): a replaced holder published",
					m.Term, m.PublishedAt, lt, m.Mids["USDJPY"], ts(m.At))
				episode = &ms[i]
			}
		}
		maxTerm, maxAt = m.Term, m.At
		lt := liveTerm(rows, m.At)
		if lt > m.Term {
			t0 := since(lt)
			if !t0.IsZero() && m.At.Sub(t0) > mirrorInterval+1500*time.Millisecond && !redisCut(t0, m.At) {
				stale++
				if episode == nil || m.At.Sub(episode.At) > 5*time.Second {
					r.add("", "snapshot still term %d at %s, %s after the lease moved to term %d", m.Term, ts(m.At), m.At.Sub(t0).Round(time.Millisecond), lt)
					episode = &ms[i]
				}
			}
		}
	}
	r.Figures = fmt.Sprintf("%d snapshot samples, %d went backwards, %d published by a replaced holder, %d behind the live term", present, backwards, zombie, stale)
	return r
}

// Lease terms only increase.
func checkLeaseTerms(ev *evidence) result {
	r := result{Name: "leaseTerms"}
	rows := sortedRows(ev.rows)
	var last int64
	var lastAt time.Time
	terms := map[int64]bool{}
	for _, rs := range rows {
		if !rs.OK || rs.Err != "" {
			continue
		}
		terms[rs.Row.Term] = true
		if rs.Row.Term < last {
			r.add("", "lease row term %d at %s after %d at %s", rs.Row.Term, ts(rs.At), last, ts(lastAt))
		}
		last, lastAt = rs.Row.Term, rs.At
	}
	r.Figures = fmt.Sprintf("%d row samples, %d terms, last %d", len(rows), len(terms), last)
	return r
}

// Never two processes trusting the lease at once. A sample answered holdsLease at some instant
// of [Sent, Recv] with trustLeftMs left, so it surely trusted over [Recv, Sent+trustLeft] — cut
// short where the soak SIGSTOPped or killed it; two processes whose sure intervals overlap
// trusted at the same instant.
func checkSingleTrust(ev *evidence) result {
	r := result{Name: "singleTrust"}
	type span struct {
		d        deskSample
		from, to time.Time
	}
	var spans []span
	for _, d := range ev.desks {
		if d.HoldsLease {
			to := d.Sent.Add(time.Duration(d.TrustLeftMs) * time.Millisecond)
			// A process SIGSTOPped or killed cannot act on the rest of its window.
			if p := ev.procs[d.PID]; p != nil {
				if h := p.haltAfter(d.Sent); !h.IsZero() && h.Before(to) {
					to = h
				}
			}
			if to.After(d.Recv) {
				spans = append(spans, span{d, d.Recv, to})
			}
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	reported := map[[2]int]bool{}
	for i := range spans {
		for j := i + 1; j < len(spans) && spans[j].from.Before(spans[i].to); j++ {
			a, b := spans[i], spans[j]
			if a.d.PID == b.d.PID || reported[[2]int{a.d.PID, b.d.PID}] {
				continue
			}
			reported[[2]int{a.d.PID, b.d.PID}] = true
			r.add("", "%s (term %d, trusted %s–%s) and %s (term %d, trusted %s–%s) trusted the lease at once",
				a.d.Proc, a.d.Term, ts(a.from), ts(a.to), b.d.Proc, b.d.Term, ts(b.from), ts(b.to))
		}
	}
	r.Figures = fmt.Sprintf("%d /desk samples, %d holding", len(ev.desks), len(spans))
	return r
}

// Every 2xx in the journal is in the database as answered.
func checkAnswersInDB(s *dbSnapshot, ev *evidence) result {
	r := result{Name: "answersInDB"}
	orders := map[int64]dbOrder{}
	for _, o := range s.Orders {
		orders[o.ID] = o
	}
	positions := map[int64]dbPosition{}
	for _, p := range s.Positions {
		positions[p.ID] = p
	}
	deals := map[int64]dbDeal{}
	for _, d := range s.Deals {
		deals[d.ID] = d
	}
	n := 0
	for _, e := range ev.journal {
		if !e.ok() || e.Method != http.MethodPost || !e.End.Before(s.Taken) {
			continue
		}
		var b struct {
			Order *struct {
				ID           int64  `json:"id"`
				AccountID    int64  `json:"accountId"`
				RequestNonce string `json:"requestNonce"`
				Status       string `json:"status"`
			} `json:"order"`
			Position *struct {
				ID     int64  `json:"id"`
				Volume string `json:"volume"`
			} `json:"position"`
			Deal *struct {
				ID     int64  `json:"id"`
				Amount string `json:"amount"`
			} `json:"deal"`
		}
		if !e.decode(&b) {
			continue
		}
		n++
		switch {
		case strings.HasPrefix(e.Op, "open"):
			if b.Order == nil {
				r.add("", "journal %d: %s answered %d without an order", e.Seq, e.Op, e.Status)
				continue
			}
			o, ok := orders[b.Order.ID]
			// An EXTERNAL order answered SENDING (a replay while its venue answer was unknown)
			// has moved on since: the reconciler filled it, or found it never reached the venue.
			moved := b.Order.Status == "SENDING" && (o.Status == "FILLED" || o.Status == "NOT_SENT" || o.Status == "REJECTED")
			if !ok || o.Account != b.Order.AccountID || o.Nonce.String != b.Order.RequestNonce || (o.Status != b.Order.Status && !moved) {
				r.add("", "journal %d: order %d (nonce %s, %s) answered %d, database has %+v (found %v)", e.Seq, b.Order.ID, b.Order.RequestNonce, b.Order.Status, e.Status, o, ok)
			}
			if b.Position != nil {
				if p, ok := positions[b.Position.ID]; !ok || p.Order != b.Order.ID {
					r.add("", "journal %d: position %d of order %d answered %d, not in the database", e.Seq, b.Position.ID, b.Order.ID, e.Status)
				}
			}
		case b.Deal != nil:
			d, ok := deals[b.Deal.ID]
			amt, _ := decimal.NewFromString(b.Deal.Amount)
			if !ok || !d.Amount.Equal(amt) {
				r.add("", "journal %d: %s %s answered %d with deal %d amount %s; database has %v (found %v)", e.Seq, e.Op, e.Path, e.Status, b.Deal.ID, b.Deal.Amount, d.Amount, ok)
			}
		}
	}
	r.Figures = fmt.Sprintf("%d 2xx answers checked", n)
	return r
}

// No 5xx but the documented 503 texts. Answers alike (status and text, less than 5 s apart) are
// one row with their count, routes, journal numbers and the faults they fell in; journal.jsonl
// has each.
func checkNo5xx(ev *evidence) result {
	r := result{Name: "no5xx"}
	allowed, unknowns, total := 0, 0, 0
	type group struct {
		first, last entry
		msg         string
		n           int
		routes      map[string]int
	}
	groups := map[string]*group{} // the open episode of each status and text
	var order []*group
	for _, e := range ev.journal {
		total++
		if e.Outcome == unknown {
			unknowns++
		}
		if e.Outcome != answered || e.Status < 500 {
			continue
		}
		msg := e.errorMessage()
		// The documented 5xx: a process that cannot quote, a database it cannot reach (nothing was
		// written), and a write whose outcome is unknown (its COMMIT's connection died; a replay
		// with the same nonce is safe — the answered-in-the-database check treats it as unknown).
		// An EXTERNAL trader's request may also meet the venue down (nothing was sent) or a venue
		// answer that never came (the reconciler books what the venue did).
		venueAnswer := ev.external[e.Client] && ((e.Status == http.StatusServiceUnavailable && msg == fx.MsgVenueUnavailable) ||
			(e.Status == http.StatusGatewayTimeout && msg == fx.MsgVenueOutcomeUnknown))
		// The front door's: a write that met contention on every retry (nothing was written), and
		// every token lookup slot taken by a flood of unknown tokens (nothing was done).
		if (e.Status == http.StatusServiceUnavailable && (msg == fx.MsgPricingUnavailable || msg == fx.MsgPositionsUnpriceable || msg == fx.MsgDatabaseUnavailable ||
			msg == fx.MsgContended || msg == fx.ErrorMessage(auth.ErrBusy))) ||
			(e.Status == http.StatusGatewayTimeout && msg == fx.MsgOutcomeUnknown) || venueAnswer {
			allowed++
			continue
		}
		if msg == "" {
			msg = truncate(string(e.Resp), 120)
		}
		// An episode: answers alike with less than 5 s between them. Its first journal entry
		// names it, so a later check extends the same row.
		kind := fmt.Sprintf("%d %q", e.Status, msg)
		g := groups[kind]
		if g == nil || e.Start.Sub(g.last.End) > 5*time.Second {
			g = &group{first: e, msg: msg, routes: map[string]int{}}
			groups[kind] = g
			order = append(order, g)
		}
		g.n++
		g.last = e
		g.routes[e.Method+" "+route(e.Path)]++
	}
	for _, g := range order {
		var routes []string
		for rt, n := range g.routes {
			routes = append(routes, fmt.Sprintf("%s ×%d", rt, n))
		}
		slices.Sort(routes)
		r.add(fmt.Sprintf("5xx from %d", g.first.Seq), "%d answers %d %q, %s–%s (%s), journal %d…%d: %s", g.n, g.first.Status, g.msg,
			ts(g.first.Start), ts(g.last.End), ev.during(g.first.Start, g.last.End), g.first.Seq, g.last.Seq, strings.Join(routes, ", "))
	}
	r.Figures = fmt.Sprintf("%d requests, %d documented 503s, %d outcome unknown", total, allowed, unknowns)
	return r
}

// route is a request path with its ids and query left out: /api/fx/positions/{id}/close.
func route(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if _, err := strconv.ParseInt(p, 10, 64); err == nil {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// tradesAgain: an order filled within 30 s after the last fault ended.
func checkTradesAgain(ev *evidence, lastFault time.Time) result {
	r := result{Name: "tradesAgain"}
	if lastFault.IsZero() {
		r.Figures = "no fault injected"
		return r
	}
	for _, e := range ev.journal {
		if strings.HasPrefix(e.Op, "open") && e.ok() && e.Start.After(lastFault) {
			took := e.End.Sub(lastFault)
			r.Figures = fmt.Sprintf("first fill %s after the last fault ended (%s)", took.Round(time.Millisecond), ts(lastFault))
			if took > 30*time.Second {
				r.add("", "the desk first filled an order %s after the last fault (journal %d)", took.Round(time.Millisecond), e.Seq)
			}
			return r
		}
	}
	r.Figures = "no fill after the last fault"
	r.add("", "no order filled after the last fault ended at %s", ts(lastFault))
	return r
}

// deskPriced are the journal's operations that fill or close at the desk's price.
var deskPriced = map[string]bool{"open": true, "open-retry": true, "close": true, "partialClose": true, "raceClose": true}

// Every fenced write committed inside its term, as far as the client sees it: a fill or a close
// answered 2xx (not a replay) never came from a process already superseded when the request was
// sent — one the lease row had shown replaced by a newer term of another process. A web process
// never claims again after losing, so its terms are the ones the row named it with. (The row is
// sampled every 200 ms; a short legitimate term between two samples is not held against anyone.)
func checkFencedInTerm(ev *evidence) result {
	r := result{Name: "fencedInTerm"}
	rows := sortedRows(ev.rows)
	maxTerm := map[int]int64{} // pid → the newest term the row named it with
	for _, rs := range rows {
		if rs.OK && rs.Err == "" && rs.Row.Term > maxTerm[rs.Row.PID] {
			maxTerm[rs.Row.PID] = rs.Row.Term
		}
	}
	byName := map[string]*proc{}
	for _, p := range ev.procs {
		byName[p.name] = p
	}
	checked := 0
	for _, e := range ev.journal {
		if !deskPriced[e.Op] || !e.ok() {
			continue
		}
		var b struct {
			Replayed bool `json:"replayed"`
		}
		if e.decode(&b) && b.Replayed {
			continue
		}
		p := byName[e.Proc]
		if p == nil {
			continue
		}
		checked++
		// The newest row sample at or before the request was sent.
		i := sort.Search(len(rows), func(i int) bool { return rows[i].At.After(e.Start) })
		for i--; i >= 0 && (!rows[i].OK || rows[i].Err != ""); i-- {
		}
		if i < 0 {
			continue
		}
		rs := rows[i]
		if e.ForwardedTerm > 0 {
			// Forwarded: the holder of the term the follower named wrote it, inside that term.
			if rs.Row.Live && rs.Row.Term > e.ForwardedTerm {
				r.add("", "journal %d: %s answered %d by %s forwarded for term %d at %s–%s, after the lease row named pid %d term %d live at %s",
					e.Seq, e.Op, e.Status, e.Proc, e.ForwardedTerm, ts(e.Start), ts(e.End), rs.Row.PID, rs.Row.Term, ts(rs.At))
			}
			continue
		}
		if rs.Row.PID != p.pid && rs.Row.Live && rs.Row.Term > maxTerm[p.pid] {
			r.add("", "journal %d: %s answered %d by %s (pid %d, newest term %d) at %s–%s, after the lease row named pid %d term %d live at %s",
				e.Seq, e.Op, e.Status, e.Proc, p.pid, maxTerm[p.pid], ts(e.Start), ts(e.End), rs.Row.PID, rs.Row.Term, ts(rs.At))
		}
	}
	r.Figures = fmt.Sprintf("%d fills and closes answered 2xx checked against the lease row", checked)
	return r
}
