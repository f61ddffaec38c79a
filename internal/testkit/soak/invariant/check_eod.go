package invariant

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/eod"
	"fxdesk/internal/fx"
	"fxdesk/internal/swaps"
)

// The end of day's invariants (docs/soak.md, «The end of day»): every frozen day holds one
// snapshot per account that existed when it was frozen, and every day a completed run had due
// and priced is frozen; each snapshot follows from the previous one and the day's deals; no row
// is rewritten once written; the marks are the day's own closing prices applied to the positions
// open at the freeze.

// eodIndex is the snapshot's end of day by day.
type eodIndex struct {
	days     map[string]dbEODDay
	accounts map[string]map[int64]dbEODAccount
	prices   map[string]map[string]dbEODPrice
	captured map[string]time.Time // each day's first closing price captured
	began    map[string]time.Time // each day's first account row written
}

func indexEOD(e *EOD) eodIndex {
	x := eodIndex{days: map[string]dbEODDay{}, accounts: map[string]map[int64]dbEODAccount{}, prices: map[string]map[string]dbEODPrice{},
		captured: map[string]time.Time{}, began: map[string]time.Time{}}
	for _, d := range e.Days {
		x.days[d.Day] = d
	}
	for _, a := range e.Accounts {
		if x.accounts[a.Day] == nil {
			x.accounts[a.Day] = map[int64]dbEODAccount{}
		}
		x.accounts[a.Day][a.Account] = a
		if t, ok := x.began[a.Day]; !ok || a.TakenAt.Before(t) {
			x.began[a.Day] = a.TakenAt
		}
	}
	for _, p := range e.Prices {
		if x.prices[p.Day] == nil {
			x.prices[p.Day] = map[string]dbEODPrice{}
		}
		x.prices[p.Day][p.Symbol] = p
		if t, ok := x.captured[p.Day]; !ok || p.CapturedAt.Before(t) {
			x.captured[p.Day] = p.CapturedAt
		}
	}
	return x
}

// capturedBy reports whether a closing price of day names process pid (host:pid) as its
// capturer.
func (x eodIndex) capturedBy(day string, pid int) bool {
	suffix := ":" + strconv.Itoa(pid)
	for _, p := range x.prices[day] {
		if pid > 0 && strings.HasSuffix(p.CapturedBy, suffix) {
			return true
		}
	}
	return false
}

// rowsOf is day's account rows in account order.
func (x eodIndex) rowsOf(day string) []dbEODAccount {
	m := x.accounts[day]
	out := make([]dbEODAccount, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}

// describe is a frozen day as a violation names it.
func (d dbEODDay) describe() string {
	return fmt.Sprintf("day %s (%s, frozen %s by %s)", d.Day, d.Mode, TimeOfDay(d.FrozenAt), d.FrozenBy)
}

// frozenByRun is the rollover run that froze d (frozenBy is host:pid); false when none of runs did.
func (d dbEODDay) frozenByRun(runs []RolloverRun) (RolloverRun, bool) {
	pid, err := strconv.Atoi(d.FrozenBy[strings.LastIndexByte(d.FrozenBy, ':')+1:])
	if err != nil {
		return RolloverRun{}, false
	}
	for _, r := range runs {
		if r.PID == pid {
			return r, true
		}
	}
	return RolloverRun{}, false
}

// EODTally counts the end of day: the days frozen, those of them frozen by a run as of a later
// rollover (caught up), and their account snapshots.
type EODTally struct{ Days, CaughtUp, Snapshots int }

func (t EODTally) String() string {
	return fmt.Sprintf("days:%d,caughtUp:%d,snapshots:%d", t.Days, t.CaughtUp, t.Snapshots)
}

// Tally counts e's frozen days; runs name who froze each.
func (e *EOD) Tally(runs []RolloverRun) EODTally {
	t := EODTally{Days: len(e.Days)}
	frozen := map[string]bool{}
	for _, d := range e.Days {
		frozen[d.Day] = true
		if run, ok := d.frozenByRun(runs); ok {
			if ro, err := fx.LastRollover(run.At); err == nil && ro.Date != d.Day {
				t.CaughtUp++
			}
		}
	}
	for _, a := range e.Accounts {
		if frozen[a.Day] {
			t.Snapshots++
		}
	}
	return t
}

// One snapshot per account per frozen day: the day's rows are as many as its fx_eod_day row
// counted, each of an account that exists, in its currency; every account opened before the
// rollover and before the freeze began (a second before the day's first row: the batch reads
// before it writes) has one, and a day rebuilt as of its rollover has none opened after it. And
// every day frozen when it should be: a run that completed as of --at had frozen every due day
// whose prices were captured before it started, and its own day when it captured them itself.
func checkEODComplete(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "eodComplete"}
	x := indexEOD(&s.EOD)
	accounts := map[int64]dbAccount{}
	for _, a := range s.Accounts {
		accounts[a.ID] = a
	}
	for _, d := range s.EOD.Days {
		got := x.rowsOf(d.Day)
		// A day frozen over a pre-filled history counted the history's accounts too.
		if len(got) != d.Accounts && !s.Scope.Prefilled() {
			r.Add("", "%s: %d account snapshots, but its fx_eod_day row counted %d", d.describe(), len(got), d.Accounts)
		}
		for _, a := range got {
			acc, ok := accounts[a.Account]
			switch {
			case !ok:
				r.Add("", "%s: a snapshot of account %d, which does not exist", d.describe(), a.Account)
			case acc.Currency != a.Currency:
				r.Add("", "%s: account %d's snapshot is in %s, the account in %s", d.describe(), a.Account, a.Currency, acc.Currency)
			case d.Mode == "CAUGHT_UP" && !acc.CreatedAt.Before(d.RolloverAt):
				r.Add("", "%s: a snapshot of account %d, opened %s, after the rollover %s it was rebuilt as of", d.describe(), a.Account,
					acc.CreatedAt.UTC().Format(time.RFC3339Nano), d.RolloverAt.UTC().Format(time.RFC3339))
			}
		}
		cut := d.FrozenAt
		if t, ok := x.began[d.Day]; ok && t.Before(cut) {
			cut = t
		}
		cut = cut.Add(-time.Second)
		if d.RolloverAt.Before(cut) {
			cut = d.RolloverAt
		}
		for _, acc := range s.Accounts {
			if _, ok := x.accounts[d.Day][acc.ID]; !ok && acc.CreatedAt.Before(cut) {
				r.Add("", "%s: no snapshot of account %d, opened %s, before the freeze", d.describe(), acc.ID, acc.CreatedAt.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	owed := 0
	for i, run := range ev.Runs {
		if !run.OK || run.End.After(s.Taken) {
			continue
		}
		due, err := swaps.DueRollovers(run.At, swaps.DefaultExpireAfter)
		if err != nil || len(due) == 0 {
			continue
		}
		last := due[len(due)-1]
		onTime := !run.At.Before(last.At) && run.At.Sub(last.At) < eod.DefaultOnTimeFor
		for _, ro := range due {
			first, ok := x.captured[ro.Date]
			if !ok {
				continue // nobody captured its prices: not frozen, and eod-prices-missing says so
			}
			before := first.Before(run.Start.Add(-time.Second))
			own := onTime && ro.Date == last.Date && x.capturedBy(ro.Date, run.PID)
			if !before && !own {
				continue // captured by another run while this one went: it may have read none
			}
			owed++
			d, ok := x.days[ro.Date]
			switch {
			case !ok:
				r.Add("unfrozen "+ro.Date, "day %s, its prices captured %s, is not frozen, though run %d (%s, --at %s, %s–%s) had it due and completed",
					ro.Date, TimeOfDay(first), i+1, run.Why, run.At.Format(time.RFC3339), TimeOfDay(run.Start), TimeOfDay(run.End))
			case d.FrozenAt.After(run.End.Add(time.Second)):
				r.Add("late "+ro.Date, "%s, its prices captured %s: frozen only after run %d (%s, --at %s, %s–%s), which had it due, completed",
					d.describe(), TimeOfDay(first), i+1, run.Why, run.At.Format(time.RFC3339), TimeOfDay(run.Start), TimeOfDay(run.End))
			}
		}
	}
	pending, unpriced := 0, 0
	for day := range x.captured {
		if _, ok := x.days[day]; !ok {
			pending++
		}
	}
	for _, a := range s.Alerts {
		if a.Code == eod.AlertPricesMissing {
			unpriced++
		}
	}
	t := s.EOD.Tally(ev.Runs)
	r.Figures = fmt.Sprintf("%d days frozen (%d caught up by a run as of a later rollover), %d account snapshots; %d frozen days owed by completed runs; "+
		"%d days priced and not frozen; %d %s alerts (a day no run could price)", t.Days, t.CaughtUp, t.Snapshots, owed, pending, unpriced, eod.AlertPricesMissing)
	return r
}

// Each frozen balance reconciles: on every frozen day, each account's previous frozen balance
// (on the frozen day before it; none: 0 through deal 0) plus its deals after that snapshot's
// throughDealId up to this one's is this balance, and the balance is what the deal it is frozen
// through left the account at. Worked out here from the snapshot's deals, asked of eod.Reconcile
// as the desk asks it, and no eod-reconciliation-failed alert was ever raised.
func checkEODReconciles(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "eodReconciles"}
	x := indexEOD(&s.EOD)
	deals := map[int64][]dbDeal{}
	byID := map[int64]dbDeal{}
	for _, d := range s.Deals {
		deals[d.Account] = append(deals[d.Account], d)
		byID[d.ID] = d
	}
	checked, counted := 0, 0
	prev := ""
	for _, d := range s.EOD.Days {
		for _, a := range x.rowsOf(d.Day) {
			checked++
			before, from, since := decimal.Zero, int64(0), "none"
			if p, ok := x.accounts[prev][a.Account]; ok && prev != "" {
				before, from, since = p.Balance, p.Through, prev
			}
			sum, n := decimal.Zero, 0
			for _, dl := range deals[a.Account] {
				if dl.ID > from && dl.ID <= a.Through {
					sum, n = sum.Add(dl.Amount), n+1
				}
			}
			counted += n
			if a.Through < from {
				r.Add("", "day %s account %d: frozen through deal %d, before the previous frozen day's (%s: deal %d)", d.Day, a.Account, a.Through, since, from)
			}
			if !before.Add(sum).Equal(a.Balance) {
				r.Add("", "day %s account %d: previous close %s (%s) + %d deals in (%d, %d] %s = %s, but the frozen balance is %s",
					d.Day, a.Account, before, since, n, from, a.Through, sum, before.Add(sum), a.Balance)
			}
			switch dl, ok := byID[a.Through]; {
			case a.Through == 0:
				if !a.Balance.IsZero() {
					r.Add("", "day %s account %d: balance %s frozen through no deal", d.Day, a.Account, a.Balance)
				}
			case !ok || dl.Account != a.Account:
				r.Add("", "day %s account %d: frozen through deal %d, which is not the account's", d.Day, a.Account, a.Through)
			case !dl.BalanceAfter.Equal(a.Balance):
				r.Add("", "day %s account %d: balance %s, but deal %d it is frozen through left the account at %s", d.Day, a.Account, a.Balance, dl.ID, dl.BalanceAfter)
			}
		}
		prev = d.Day
	}
	for _, m := range ev.Reconciled {
		r.Add("", "eod.Reconcile: account %d on %s: previous close %s + the day's deals %s ≠ frozen balance %s %s (difference %s)",
			m.AccountID, m.TradingDay, m.Previous, m.Deals, m.Balance, m.Currency, m.Difference)
	}
	if ev.ReconcileErr != "" {
		r.Add("eod.Reconcile error", "eod.Reconcile could not check the frozen days: %s", ev.ReconcileErr)
	}
	alerts := 0
	for _, a := range s.Alerts {
		if a.Code == eod.AlertReconciliation {
			alerts++
			r.Add("", "%s raised %s (%s): %s", a.Code, TimeOfDay(a.FirstSeen), a.Status, Truncate(a.Message, 300))
		}
	}
	r.Figures = fmt.Sprintf("%d account snapshots on %d frozen days follow from the previous one and %d deals; eod.Reconcile: %d mismatches; %d %s alerts",
		checked, len(s.EOD.Days), counted, len(ev.Reconciled), alerts, eod.AlertReconciliation)
	return r
}

// No end-of-day row is rewritten or removed: every row the soak read during the run (after each
// rollover run, at each check) holds the same values now — every row read before this snapshot
// was taken, so that what the read saw was committed before the snapshot's. And a frozen day's closing prices are
// the ones its freeze could use: none of them captured after the day's first snapshot row.
func checkEODUnchanged(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "eodUnchanged"}
	now := map[string]EODRow{}
	for _, row := range s.EOD.Rows(s.Taken) {
		now[row.ID()] = row
	}
	tables := map[string]int{}
	held := 0
	for _, id := range slices.Sorted(maps.Keys(ev.EODSeen)) {
		seen := ev.EODSeen[id]
		if !seen.Seen.Before(s.Taken) {
			continue // read after this snapshot began: it may be newer than the snapshot
		}
		held++
		tables[seen.Table]++
		cur, ok := now[id]
		switch {
		case !ok:
			r.Add(id, "%s, read at %s as [%s], is gone", id, TimeOfDay(seen.Seen), seen.Values)
		case cur.Values != seen.Values:
			r.Add(id, "%s was rewritten: [%s] when read at %s, now [%s]", id, seen.Values, TimeOfDay(seen.Seen), cur.Values)
		}
	}
	x := indexEOD(&s.EOD)
	for _, p := range s.EOD.Prices {
		d, ok := x.days[p.Day]
		if !ok {
			continue
		}
		first := d.FrozenAt
		if t, ok := x.began[p.Day]; ok && t.Before(first) {
			first = t
		}
		if p.CapturedAt.After(first) {
			r.Add("", "fx_eod_price %s %s (bid %s, ask %s) captured %s by %s, after %s began", p.Day, p.Symbol, p.Bid, p.Ask,
				TimeOfDay(p.CapturedAt), p.CapturedBy, d.describe())
		}
	}
	r.Figures = fmt.Sprintf("%d rows held to their first read (%d day, %d account, %d symbol, %d price rows); %d rows now",
		held, tables["fx_eod_day"], tables["fx_eod_account"], tables["fx_eod_symbol"], tables["fx_eod_price"], len(now))
	return r
}

// eodOpenSlack: a position written within this of an account's snapshot row may or may not be in
// the read the row was made from (the batch reads, then writes; a commit follows its event).
const eodOpenSlack = 10 * time.Second

// The frozen marks are the day's own: for every account snapshot of a day frozen at its rollover
// whose terms are known (its group at the freeze — from the moves in the audit log, none written
// within eodOpenSlack before its row — never overridden during the run, no symbol group or
// instrument edited) and whose positions are known at the freeze (none written within
// eodOpenSlack before its row), the floating P&L recomputed from the day's fx_eod_price rows and
// the positions open at the read — those written before it, at their volume less the closes
// among the deals the snapshot includes — is the frozen one, each symbol and side at its close
// price (bid − markup for a buy, ask + markup for a sell), converted through the USD hub at the
// day's mids and rounded once to the account's currency, as internal/book marks a fill; equity is
// balance + floating, free margin equity − margin, the open positions are as many; and the marks
// are NULL exactly when a price they need was not captured. Days rebuilt later from the ledger
// are not judged, nor is margin (the leverage terms move during the run).
func checkEODMarks(s *Snapshot) Result {
	r := Result{Name: "eodMarks"}
	x := indexEOD(&s.EOD)
	accounts := map[int64]dbAccount{}
	for _, a := range s.Accounts {
		accounts[a.ID] = a
	}
	moves := map[int64][]dbAudit{}
	overridden := maps.Clone(s.Overridden)
	catalogEdited := false
	for _, a := range s.Audits {
		switch {
		case a.Action == "account.move":
			if id, err := strconv.ParseInt(a.EntityID, 10, 64); err == nil {
				moves[id] = append(moves[id], a)
			}
		case a.EntityType == "symbol_override":
			overridden[strings.SplitN(a.EntityID, "/", 2)[0]] = true
		case a.EntityType == "symbol_group" || a.EntityType == "instrument":
			catalogEdited = true
		}
	}
	pairs := map[string]string{}
	for sym, in := range s.Instruments {
		pairs[in.Base+in.Quote] = sym
	}
	written := positionsWritten(s)
	netted := nettedAccounts(s)
	histories := nettedHistories(s, netted)
	positions := map[int64][]dbPosition{}
	for _, p := range s.Positions {
		positions[p.Account] = append(positions[p.Account], p)
	}
	closes := map[int64][]dbDeal{}
	for _, d := range s.Deals {
		if d.Type == "PROFIT" && d.Position.Valid && d.Volume.Valid {
			closes[d.Position.Int64] = append(closes[d.Position.Int64], d)
		}
	}
	judged, exposed, marked, unpriced := 0, 0, 0, 0
	skipped := map[string]int{}
	for _, d := range s.EOD.Days {
		if d.Mode != "ON_TIME" {
			skipped["rebuilt day"] += len(x.accounts[d.Day])
			continue
		}
		prices := x.prices[d.Day]
		for _, a := range x.rowsOf(d.Day) {
			acc, ok := accounts[a.Account]
			if !ok {
				continue // eodComplete says so
			}
			group, known := groupAtFreeze(acc, moves[acc.ID], a.TakenAt)
			switch {
			case catalogEdited:
				skipped["catalog edited"]++
				continue
			case !known:
				skipped["an account move near the freeze"]++
				continue
			case overridden[group]:
				skipped["its group overridden"]++
				continue
			}
			legs, open, known := openAtFreeze(positions[a.Account], written, closes, a)
			if netted[a.Account] {
				legs, open, known = nettedAtFreeze(positions[a.Account], histories, a) // check_netted.go
			}
			if !known {
				skipped["a position written near the freeze"]++
				continue
			}
			judged++
			if open > 0 {
				exposed++
			}
			if open != a.OpenPositions {
				r.Add("", "day %s account %d: %d open positions frozen, but its positions and the deals it includes (through %d) leave %d open",
					d.Day, a.Account, a.OpenPositions, a.Through, open)
			}
			floating, missing := eodFloating(s, pairs, prices, acc.Currency, legs)
			if missing != "" {
				unpriced++
				if a.Equity.Valid || a.Margin.Valid || a.FreeMargin.Valid || a.Floating.Valid {
					r.Add("", "day %s account %d: marked (floating %s) although the day has no closing price of %s", d.Day, a.Account, nullText(a.Floating), missing)
				}
				continue
			}
			marked += open
			switch {
			case !a.Floating.Valid || !a.Equity.Valid || !a.Margin.Valid || !a.FreeMargin.Valid:
				r.Add("", "day %s account %d: marks NULL (floating %s, equity %s, margin %s) although every price its %d positions need was captured",
					d.Day, a.Account, nullText(a.Floating), nullText(a.Equity), nullText(a.Margin), open)
			case !a.Floating.Decimal.Equal(floating):
				r.Add("", "day %s account %d: floating P&L %s frozen, but its %d open positions at the day's prices make %s (%s)",
					d.Day, a.Account, a.Floating.Decimal, open, floating, describeLegs(legs, prices))
			case !a.Equity.Decimal.Equal(a.Balance.Add(floating)):
				r.Add("", "day %s account %d: equity %s, but balance %s + floating %s = %s", d.Day, a.Account, a.Equity.Decimal, a.Balance, floating, a.Balance.Add(floating))
			case !a.FreeMargin.Decimal.Equal(a.Equity.Decimal.Sub(a.Margin.Decimal)):
				r.Add("", "day %s account %d: free margin %s, but equity %s − margin %s = %s", d.Day, a.Account, a.FreeMargin.Decimal, a.Equity.Decimal, a.Margin.Decimal,
					a.Equity.Decimal.Sub(a.Margin.Decimal))
			}
		}
	}
	var not []string
	for _, k := range slices.Sorted(maps.Keys(skipped)) {
		not = append(not, fmt.Sprintf("%d (%s)", skipped[k], k))
	}
	if len(not) == 0 {
		not = []string{"none"}
	}
	r.Figures = fmt.Sprintf("%d account snapshots judged (%d with open positions, %d positions marked at their day's prices, %d unpriced); not judged: %s",
		judged, exposed, marked, unpriced, strings.Join(not, ", "))
	return r
}

// groupAtFreeze is acc's account group when a snapshot written at takenAt read it: the group its
// first move after then took it from, or its group now. known is false when a move was written
// within eodOpenSlack before the row, so the read may or may not have seen it.
func groupAtFreeze(acc dbAccount, moves []dbAudit, takenAt time.Time) (group string, known bool) {
	for _, m := range moves {
		if m.At.Before(takenAt.Add(-eodOpenSlack)) {
			continue
		}
		if m.At.Before(takenAt) {
			return "", false
		}
		var before struct {
			Group string `json:"group"`
		}
		if json.Unmarshal([]byte(m.Before.String), &before) != nil || before.Group == "" {
			return "", false
		}
		return before.Group, true
	}
	return acc.Group, true
}

// eodLeg is an account's open volume on one symbol and side at a freeze, with Σ volume × open.
type eodLeg struct {
	symbol, side        string
	volume, volumePrice decimal.Decimal // volumePrice: Σ volume × openPrice
}

// openAtFreeze is what account snapshot a held open when it was read: the positions written
// before the read, each at its opened volume less the closes among the deals the snapshot
// includes (through its throughDealId: an account's deals commit in id order), summed by symbol
// and side in first-seen order. known is false when a position was written within eodOpenSlack
// of the row, so the read may or may not have seen it.
func openAtFreeze(ps []dbPosition, written map[int64]time.Time, closes map[int64][]dbDeal, a dbEODAccount) (legs []eodLeg, open int, known bool) {
	at := map[[2]string]int{}
	for _, p := range ps {
		w := written[p.ID]
		if !w.Before(a.TakenAt) {
			continue // committed after the row was written, so after the read
		}
		if w.After(a.TakenAt.Add(-eodOpenSlack)) {
			return nil, 0, false
		}
		v := p.OpenVolume
		for _, c := range closes[p.ID] {
			if c.ID <= a.Through {
				v = v.Sub(c.Volume.Decimal)
			}
		}
		if !v.IsPositive() {
			continue
		}
		open++
		k := [2]string{p.Symbol, p.Side}
		i, ok := at[k]
		if !ok {
			i = len(legs)
			at[k] = i
			legs = append(legs, eodLeg{symbol: p.Symbol, side: p.Side, volume: decimal.Zero, volumePrice: decimal.Zero})
		}
		legs[i].volume = legs[i].volume.Add(v)
		legs[i].volumePrice = legs[i].volumePrice.Add(v.Mul(p.OpenPrice))
	}
	return legs, open, true
}

var two = decimal.NewFromInt(2)

// eodFloating is legs' floating P&L in currency at prices, each leg rounded once; missing names
// the first symbol whose price it needed and the day lacks ("" when none).
func eodFloating(s *Snapshot, pairs map[string]string, prices map[string]dbEODPrice, currency string, legs []eodLeg) (decimal.Decimal, string) {
	mid := func(symbol string) (decimal.Decimal, bool) {
		p, ok := prices[symbol]
		return p.Bid.Add(p.Ask).Div(two), ok
	}
	// toUSD is one unit of ccy in USD as num/den: the mid of CCYUSD, or 1 over the mid of USDCCY
	// (the desk's USD hub, internal/book).
	toUSD := func(ccy string) (num, den decimal.Decimal, missing string) {
		one := decimal.NewFromInt(1)
		if ccy == "USD" {
			return one, one, ""
		}
		if sym, ok := pairs[ccy+"USD"]; ok {
			m, ok := mid(sym)
			if !ok {
				return one, one, sym
			}
			return m, one, ""
		}
		if sym, ok := pairs["USD"+ccy]; ok {
			m, ok := mid(sym)
			if !ok {
				return one, one, sym
			}
			return one, m, ""
		}
		return one, one, "a USD pair of " + ccy
	}
	total := decimal.Zero
	for _, l := range legs {
		in := s.Instruments[l.symbol]
		p, ok := prices[l.symbol]
		if !ok {
			return decimal.Zero, l.symbol
		}
		markup := in.Markup.Mul(in.Point)
		close := p.Bid.Sub(markup)
		if l.side == "SELL" {
			close = p.Ask.Add(markup)
		}
		diff := close.Mul(l.volume).Sub(l.volumePrice)
		if l.side == "SELL" {
			diff = diff.Neg()
		}
		amount := diff.Mul(in.Contract)
		if in.Quote != currency {
			an, ad, miss := toUSD(in.Quote)
			if miss != "" {
				return decimal.Zero, miss
			}
			bn, bd, miss := toUSD(currency)
			if miss != "" {
				return decimal.Zero, miss
			}
			amount = amount.Mul(an.Mul(bd)).DivRound(ad.Mul(bn), 16)
		}
		total = total.Add(fx.RoundMoney(currency, amount))
	}
	return total, ""
}

// describeLegs is legs with the day's price of each, for a violation.
func describeLegs(legs []eodLeg, prices map[string]dbEODPrice) string {
	var parts []string
	for _, l := range legs {
		p := prices[l.symbol]
		parts = append(parts, fmt.Sprintf("%s %s %s lots, Σ volume × open %s, bid %s ask %s", l.symbol, l.side, l.volume, l.volumePrice, p.Bid, p.Ask))
	}
	return strings.Join(parts, "; ")
}

func nullText(d decimal.NullDecimal) string {
	if !d.Valid {
		return "NULL"
	}
	return d.Decimal.String()
}
