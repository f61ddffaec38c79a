package invariant

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/eod"
)

// Result is one invariant's verdict on one check: its figures, and the rows that break it.
type Result struct {
	Name       string
	Figures    string
	Violations []Violation
}

// Violation is one row that breaks an invariant. Key names the row across checks (its text may
// grow with later evidence); an empty key means the text itself.
type Violation struct {
	Key, Text string
}

func (r *Result) Add(key, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	if key == "" {
		key = text
	}
	r.Violations = append(r.Violations, Violation{key, text})
}

// Evidence is what the checks read besides the database.
type Evidence struct {
	Journal []Entry
	Procs   map[int]*Process // by pid
	Desks   []DeskSample
	Rows    []RowSample
	Mirrors []MirrorSample
	Runs    []RolloverRun
	// ScheduledSwaps are fxdesk-cron's own hourly processFxSwaps runs (ScheduledSwapRuns).
	ScheduledSwaps []RolloverRun
	Windows        []Window
	// Venue is the venue simulator's state read with the snapshot (nil: unreadable then);
	// External names the clients trading on the EXTERNAL account group.
	Venue    *VenueState
	External map[string]bool
	// Floods and Reuses are what the front-door faults saw.
	Floods []Flood
	Reuses []Reuse
	// InFlight are the request ids of requests sent and not yet journaled when the journal was
	// read (after the snapshot): an audit row of one may be in the snapshot.
	InFlight map[string]bool
	// Refusals is what the refused-request lane knows beside its requests (nil: it did not run).
	Refusals *Refusals
	// EODSeen is every end-of-day row as the soak first saw it during the run — read after each
	// rollover run and at each check — by EODRow.ID. Reconciled is what eod.Reconcile said of
	// every frozen day, asked right after the snapshot; ReconcileErr why it could not be asked.
	EODSeen      map[string]EODRow
	Reconciled   []eod.Mismatch
	ReconcileErr string
	// Prices is what the price lane saw (nil: it did not run).
	Prices *PriceEvidence
	// Trails are the trailing stops sampled during the run (check_orders_trail.go).
	Trails []TrailSample
	// Pages are the holder's status pages sampled during the run (check_status_page.go).
	Pages []PageSample
}

// Process is one desk process as the checks know it: its name, its pid, and its halts — when it
// stopped being able to act: each SIGSTOP, and the SIGKILL or SIGTERM that ended it. A trust
// window cannot be used past one. Stops are its SIGSTOPs with their SIGCONTs, recorded as the soak
// sends them — unlike a fault's Window, noted only once the fault has played out, so a check made
// while a process is stopped knows it.
type Process struct {
	Name  string
	PID   int
	Halts []time.Time
	Stops []Stop
}

// Stop is one SIGSTOP of a process: At, until Resumed (its SIGCONT, or the kill that ended it; zero
// while it is still stopped).
type Stop struct {
	At, Resumed time.Time
}

// HaltAfter is the first halt at or after t, or the zero time.
func (p *Process) HaltAfter(t time.Time) time.Time {
	for _, h := range p.Halts {
		if !h.Before(t) {
			return h
		}
	}
	return time.Time{}
}

// during names the fault windows that overlap [a, b], for reading a violation.
func (ev *Evidence) during(a, b time.Time) string {
	var names []string
	for _, w := range ev.Windows {
		if !w.Start.After(b.Add(2*time.Second)) && !w.End.Before(a.Add(-2*time.Second)) {
			names = append(names, w.Kind+"@"+w.Start.Format("15:04:05.000"))
		}
	}
	if len(names) == 0 {
		return "no fault"
	}
	return "during " + strings.Join(names, ",")
}

// TimeOfDay is t as a report shows an instant: UTC, to the millisecond.
func TimeOfDay(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// Truncate is s cut to n bytes, marked: how a report quotes an answer or a log line.
func Truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// CheckAll runs every invariant on one snapshot and the evidence gathered up to it.
func CheckAll(s *Snapshot, ev *Evidence) []Result {
	rs := []Result{
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
		checkAuditTrail(s, ev),
		checkRefusedChangedNothing(s, ev),
		checkNegativeBalance(s),
		checkStopOutTerms(s),
		checkEvents(s),
		checkRouting(s),
		checkEODComplete(s, ev),
		checkEODReconciles(s, ev),
		checkEODUnchanged(s, ev),
		checkEODMarks(s),
		checkStatusPageBook(ev),
	}
	if s.Scope.Prefilled() {
		rs = append(rs, checkPrefilledLedger(s))
	}
	if ev.Venue != nil {
		rs = append(rs, checkVenueNeverResent(ev.Venue))
	}
	rs = append(rs, CheckPrices(s, ev)...)
	rs = append(rs, checkOrders(s, ev)...)
	return rs
}

// Σ deals = balance, and each deal's balanceAfter is the previous one's plus its amount, in deal
// id order within the account: every writer locks the account row before it inserts the deal,
// so ids within one account follow commit order.
func checkLedger(s *Snapshot) Result {
	r := Result{Name: "ledger"}
	by := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		by[d.Account] = append(by[d.Account], d)
	}
	for _, a := range s.Accounts {
		sum := decimal.Zero
		for _, d := range by[a.ID] {
			want := sum.Add(d.Amount)
			if !d.BalanceAfter.Equal(want) {
				r.Add("", "account %d deal %d (%s %s, key %s): balanceAfter %s, previous %s + amount = %s",
					a.ID, d.ID, d.Type, d.Amount, d.Key, d.BalanceAfter, sum, want)
			}
			sum = want
		}
		if !sum.Equal(a.Balance) {
			r.Add("", "account %d: Σ %d deals = %s, balance = %s", a.ID, len(by[a.ID]), sum, a.Balance)
		}
	}
	r.Figures = fmt.Sprintf("%d accounts, %d deals", len(s.Accounts), len(s.Deals))
	return r
}

// The pre-filled history's ledger (docs/soak.md, «A pre-filled month»): every account before the
// scope — the generator's, and whatever the desk's jobs and risk engine booked on them during
// the run — has a balance equal to Σ its deals and to its last deal's balanceAfter. Each deal's
// link in the chain is the generator's own test's to check (internal/yeargen); here the sums.
func checkPrefilledLedger(s *Snapshot) Result {
	r := Result{Name: "prefilledLedger"}
	for _, b := range s.Prefilled.Broken {
		r.Add(fmt.Sprintf("account %d", b.Account), "history account %d: balance %s, Σ %d deals = %s, last balanceAfter %s",
			b.Account, b.Balance, b.Deals, b.Sum, b.LastAfter)
	}
	r.Figures = fmt.Sprintf("%d history accounts, %d deals", s.Prefilled.Accounts, s.Prefilled.Deals)
	return r
}

// No position closed twice, closed volume ≤ opened, and the position row agrees with its close
// deals; two concurrent full closes of one position never both succeed.
func checkPositions(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "positions"}
	closes := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && strings.HasPrefix(d.Key, "close:") {
			closes[d.Position.Int64] = append(closes[d.Position.Int64], d)
		}
	}
	closed := 0
	grown := nettedCloseOpens(s, nettedAccounts(s)) // check_netted.go
	for _, p := range s.Positions {
		left := p.OpenVolume
		for i, d := range closes[p.ID] { // id order
			before, _ := decimal.NewFromString(d.Key[strings.LastIndexByte(d.Key, ':')+1:])
			open, known := nettedOpenBefore(grown, p, d.Key, left, i)
			if left.IsZero() {
				r.Add("", "position %d closed again after it was fully closed: deal %d volume %s", p.ID, d.ID, d.Volume.Decimal)
			} else if known && !before.Equal(open) {
				r.Add("", "position %d deal %d closed %s from %s, but %s was open", p.ID, d.ID, d.Volume.Decimal, before, open)
			}
			left = left.Sub(d.Volume.Decimal)
		}
		switch {
		case left.IsNegative():
			r.Add("", "position %d (%s): closed %s of %s opened", p.ID, p.Symbol, p.OpenVolume.Sub(left), p.OpenVolume)
		case !left.Equal(p.Volume):
			r.Add("", "position %d: volume %s, but opened %s minus its close deals is %s", p.ID, p.Volume, p.OpenVolume, left)
		case (p.Status == "CLOSED") != p.Volume.IsZero():
			r.Add("", "position %d: status %s with volume %s", p.ID, p.Status, p.Volume)
		}
		if p.Status == "CLOSED" {
			closed++
		}
	}
	// The two halves of a race are journaled one after the other by one client.
	type raceKey struct {
		client, path string
	}
	wins := map[raceKey][]Entry{}
	races := 0
	for _, e := range ev.Journal {
		if e.Op == "raceClose" {
			races++
			if e.OK() {
				k := raceKey{e.Client, e.Path}
				wins[k] = append(wins[k], e)
			}
		}
	}
	for k, es := range wins {
		// Successive races of one position are impossible: the first full close ends it.
		if len(es) > 1 {
			r.Add("", "%s %s: %d concurrent full closes answered 2xx (journal seq %d and %d)", k.client, k.path, len(es), es[0].Seq, es[1].Seq)
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
func checkNonces(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "nonces"}
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
			r.Add("", "account %d nonce %s: orders %v", k.account, k.nonce, ids)
		}
	}
	answers := map[string]map[int64]bool{}
	retried := 0
	for _, e := range ev.Journal {
		if !strings.HasPrefix(e.Op, "open") || !e.OK() {
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
		if e.Decode(&b) {
			if answers[b.Order.RequestNonce] == nil {
				answers[b.Order.RequestNonce] = map[int64]bool{}
			}
			answers[b.Order.RequestNonce][b.Order.ID] = true
		}
	}
	for n, ids := range answers {
		if len(ids) > 1 {
			r.Add("", "nonce %s answered with orders %v", n, keys(ids))
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
