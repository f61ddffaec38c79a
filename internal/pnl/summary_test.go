package pnl_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/pnl"
	"fxdesk/internal/tick"
)

// The summaries change where a report reads, never what it says: on two months of random
// deals, openings and hedges (both books, markup recorded or not, negative balance protection
// and other adjustments, deals without a symbol, two account currencies), summarised up to a
// time inside them, every figure of every report — short and long, on the hour and off it,
// reaching into what is not summarised yet — equals the figures the report read before the
// summaries existed (oldReport: its statements as they were), to the cent; so do the hourly
// series of ranges that start on the hour. Summarising twice at once, or again, changes nothing.
func TestSummariesAnswerAsTheLedger(t *testing.T) {
	ctx := context.Background()
	runs++
	t.Cleanup(func() {
		clearSummaries(t)
		// The package's other tests mark what is open and expect their own positions alone.
		testDB.Exec("UPDATE `fx_position` SET `status` = 'CLOSED', `volume` = 0 WHERE `status` = 'OPEN' AND `openedAt` >= '2026-06-01' AND `openedAt` < '2026-08-01'")
	})
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 2, 0)
	rng := rand.New(rand.NewPCG(42, 7))
	seedLedger(t, rng, start, end)
	cat, err := catalog.Load(ctx, testDB)
	if err != nil {
		t.Fatal(err)
	}
	through := start.Add(45*24*time.Hour + 5*time.Hour)
	// Two summarisers at once, then a third: they take turns and the rows are the same.
	var wg sync.WaitGroup
	counts := make([]int, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { counts[i], errs[i] = pnl.Summarise(ctx, testDB, through) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if counts[0]+counts[1] == 0 {
		t.Fatal("nothing summarised")
	}
	before := summaryRows(t)
	if n, err := pnl.Summarise(ctx, testDB, through); err != nil || n != 0 {
		t.Fatalf("again: %d hours, %v; want none", n, err)
	}
	if after := summaryRows(t); after != before || !strings.Contains(before, "day") {
		t.Fatalf("summaries moved or missing: %s → %s", before, after)
	}
	// An operator's rewind into the middle of a day and of an hour rewrites the same rows.
	if _, err := testDB.Exec("UPDATE `fx_pnl_summary` SET `through` = ? WHERE `id` = 1", through.Add(-50*time.Hour-20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := pnl.Summarise(ctx, testDB, through); err != nil || n < 50 {
		t.Fatalf("after a rewind: %d hours, %v", n, err)
	}
	if after := summaryRows(t); after != before {
		t.Fatalf("a rewind changed the summaries: %s → %s", before, after)
	}
	type rng2 struct {
		from, to time.Time
		why      string
	}
	ranges := []rng2{
		{time.Date(2026, 7, 10, 21, 0, 0, 0, time.UTC), time.Date(2026, 7, 11, 15, 0, 0, 0, time.UTC), "a trading day so far"},
		{through.Add(-7 * 24 * time.Hour), through.Add(3 * time.Hour), "7 days reaching past the summaries"},
		{start.Add(3*24*time.Hour + 17*time.Minute), start.Add(33*24*time.Hour + 17*time.Minute), "30 days off the hour"},
		{start.Add(-24 * time.Hour), end.Add(24 * time.Hour), "longer than 31 days: by trading day"},
		{through.Add(-90 * time.Minute), through.Add(-30 * time.Minute), "one hour across an hour"},
	}
	for range 40 {
		from := start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)))))
		if rng.IntN(2) == 0 {
			from = from.Truncate(time.Hour)
		}
		to := from.Add(time.Duration(1 + rng.Int64N(int64(40*24*time.Hour))))
		ranges = append(ranges, rng2{from, to, "random"})
	}
	m := book.NewMarket(threeQuotes{}, cat)
	for _, r := range ranges {
		want, err := oldReport(ctx, testDB, r.from, r.to, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pnl.Read(ctx, testDB, cat, threeQuotes{}, r.from, r.to, false)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s [%s, %s)", r.why, r.from.Format(time.RFC3339), r.to.Format(time.RFC3339))
		if g, w := figuresOf(got), want.figures; g != w {
			t.Errorf("%s: figures\n got %s\nwant %s", name, g, w)
		}
		if got.UnrecordedMarkup != want.unrecorded || got.Total == nil || !got.Total.Equal(want.total) {
			t.Errorf("%s: unrecorded %d total %v, want %d %s", name, got.UnrecordedMarkup, got.Total, want.unrecorded, want.total)
		}
		switch {
		case r.to.Sub(r.from) > pnl.HourlyRange:
			if len(got.Hours) != 0 || len(got.Days) < int(r.to.Sub(r.from)/(24*time.Hour)) {
				t.Errorf("%s: %d hours, %d days", name, len(got.Hours), len(got.Days))
			}
		case r.from.Equal(r.from.Truncate(time.Hour)):
			if g := seriesOf(got.Hours); g != want.hours {
				t.Errorf("%s: hours\n got %s\nwant %s", name, g, want.hours)
			}
		}
	}
	// Marked now, the floating P&L is the figure the old statement gave.
	rep, err := pnl.Read(ctx, testDB, cat, threeQuotes{}, through.Add(-48*time.Hour), time.Now(), true)
	if err != nil || rep.Total == nil {
		t.Fatalf("floating: %+v %v", rep, err)
	}
	want, err := oldFloating(ctx, testDB, m)
	if err != nil {
		t.Fatal(err)
	}
	if got := floatingOf(rep); got != want || !strings.Contains(want, "EUR/EURUSD") {
		t.Errorf("floating\n got %s\nwant %s", got, want)
	}
}

// floatingOf writes a report's floating P&L per currency and symbol.
func floatingOf(rep pnl.Report) string {
	var sb strings.Builder
	for _, c := range rep.Currencies {
		for _, s := range c.Symbols {
			if s.BBookFloating != nil {
				fmt.Fprintf(&sb, "%s/%s %s; ", c.Currency, s.Symbol, s.BBookFloating.StringFixed(2))
			}
		}
	}
	return sb.String()
}

// oldFloating is the floating P&L as it was read: the old statement (an account's group and
// currency joined to each group of its positions), each converted and rounded with Convert.
func oldFloating(ctx context.Context, db *sql.DB, m *book.Market) (string, error) {
	rows, err := db.QueryContext(ctx, "SELECT a.`id`, a.`accountGroup`, a.`currency`, p.`symbol`, p.`side`, SUM(p.`volume`), SUM(p.`volume` * p.`openPrice`) "+
		"FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` WHERE p.`status` = 'OPEN' AND p.`venueTradeId` IS NULL AND p.`volume` > 0 "+
		"GROUP BY a.`id`, a.`accountGroup`, a.`currency`, p.`symbol`, p.`side`")
	if err != nil {
		return "", err
	}
	defer rows.Close()
	sums := map[string]decimal.Decimal{}
	for rows.Next() {
		var account int64
		var group, ccy, sym string
		var side fx.Side
		var volume, volumePrice decimal.Decimal
		if err := rows.Scan(&account, &group, &ccy, &sym, &side, &volume, &volumePrice); err != nil {
			return "", err
		}
		t, ok := m.Catalog.Effective(group, sym)
		if !ok {
			continue
		}
		q, ok := m.Quote(sym)
		if !ok {
			continue
		}
		p, ok := m.Convert(book.ProfitQuote(t.Instrument, side, volume, volumePrice, book.ClosePrice(t.Instrument, q, side)), t.Instrument.Quote, ccy)
		if !ok {
			continue
		}
		sums[ccy+"/"+sym] = sums[ccy+"/"+sym].Sub(p)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&sb, "%s %s; ", k, sums[k].StringFixed(2))
	}
	return sb.String(), nil
}

// clearSummaries drops every summary, so the package's other tests, which date rows in the
// past, read the ledger alone.
func clearSummaries(t *testing.T) {
	for _, q := range []string{"DELETE FROM `fx_pnl_hour`", "DELETE FROM `fx_pnl_day`", "DELETE FROM `fx_pnl_series`", "DELETE FROM `fx_pnl_summary`"} {
		if _, err := testDB.Exec(q); err != nil {
			t.Error(err)
		}
	}
}

func summaryRows(t *testing.T) string {
	var h, d, s int
	var sum decimal.Decimal
	var through sql.NullTime
	if err := testDB.QueryRow("SELECT (SELECT COUNT(*) FROM `fx_pnl_hour`), (SELECT COUNT(*) FROM `fx_pnl_day`), (SELECT COUNT(*) FROM `fx_pnl_series`), "+
		"(SELECT COALESCE(SUM(`profitBBook` + `commission`), 0) FROM `fx_pnl_day`), (SELECT `through` FROM `fx_pnl_summary`)").Scan(&h, &d, &s, &sum, &through); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d hour, %d day (Σ %s), %d series rows through %s", h, d, sum, s, through.Time)
}

// seedLedger writes random rows over [start, end) as a ledger's fixtures (the report reads them
// as rows; balances are not its subject).
func seedLedger(t *testing.T, rng *rand.Rand, start, end time.Time) {
	t.Helper()
	at := func() time.Time {
		return start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)))) / time.Millisecond * time.Millisecond)
	}
	accounts := map[int64]string{}
	var ids []int64
	for i := range 8 {
		ccy := "USD"
		if i%3 == 2 {
			ccy = "EUR"
		}
		id := account(t, ccy)
		accounts[id] = ccy
		ids = append(ids, id)
	}
	symbols := []string{"EURUSD", "GBPUSD", "USDJPY"}
	var pos, args []any
	type position struct {
		id      int64
		account int64
		symbol  string
	}
	var positions []position
	var first int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1 FROM `fx_position`").Scan(&first); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := range 3000 {
		id := first + int64(i)
		acct := ids[rng.IntN(len(ids))]
		sym := symbols[rng.IntN(len(symbols))]
		var venue, markup any
		if rng.IntN(10) < 3 {
			venue = fmt.Sprintf("SUM-%d", id)
		}
		if rng.IntN(20) != 0 {
			markup = decimal.New(rng.Int64N(100000), -3).String()
		}
		if sb.Len() > 0 {
			sb.WriteString(", ")
		}
		status, volume, side := "CLOSED", "0", "BUY"
		if rng.IntN(5) == 0 {
			status, volume = "OPEN", decimal.New(1+rng.Int64N(100), -4).String()
		}
		if rng.IntN(2) == 0 {
			side = "SELL"
		}
		sb.WriteString("(?, ?, 0, ?, ?, ?, ?, 0.01, ?, ?, ?, ?)")
		pos = append(pos, id, acct, venue, sym, side, volume, decimal.New(9000+rng.Int64N(200000), -5).String(), status, markup, at())
		positions = append(positions, position{id, acct, sym})
	}
	if _, err := testDB.Exec("INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `venueTradeId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `markup`, `openedAt`) VALUES "+sb.String(), pos...); err != nil {
		t.Fatal(err)
	}
	types := []string{"PROFIT", "PROFIT", "PROFIT", "COMMISSION", "COMMISSION", "SWAP", "ADJUSTMENT", "DEPOSIT"}
	for batch := range 10 {
		sb.Reset()
		args = args[:0]
		for i := range 2000 {
			p := positions[rng.IntN(len(positions))]
			typ := types[rng.IntN(len(types))]
			key := fmt.Sprintf("sum:%d:%d:%d", runs, batch, i) // unique per run (-count)
			var positionID, symbol, markup any = p.id, p.symbol, nil
			switch typ {
			case "ADJUSTMENT":
				if rng.IntN(2) == 0 {
					key = "nbp:" + key
				}
			case "PROFIT":
				if rng.IntN(20) != 0 {
					markup = decimal.New(rng.Int64N(100000), -3).String()
				}
			case "DEPOSIT":
				positionID, symbol = nil, nil
			}
			if rng.IntN(15) == 0 {
				symbol = nil
			}
			if sb.Len() > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?, ?, 0, ?, ?, ?, ?, ?, ?)")
			args = append(args, p.account, typ, decimal.New(rng.Int64N(2000000)-1000000, -2).String(), accounts[p.account], positionID, symbol, markup, key, at())
		}
		if _, err := testDB.Exec("INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `positionId`, `symbol`, `markup`, `idempotencyKey`, `createdAt`) VALUES "+sb.String(), args...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		res, err := testDB.Exec("INSERT INTO `fx_hedge_order` (`symbol`, `units`, `why`, `status`) VALUES ('USDJPY', 100000, 'HEDGER', 'FILLED')")
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		ccy, sym := "USD", "EURUSD"
		if i%2 == 1 {
			ccy, sym = "JPY", "USDJPY"
		}
		closed := at()
		if _, err := testDB.Exec("INSERT INTO `fx_hedge_position` (`orderId`, `symbol`, `units`, `venueTradeId`, `status`, `openPrice`, `openedAt`, `closePrice`, "+
			"`closedAt`, `realizedPl`, `plCurrency`) VALUES (?, ?, 100000, ?, 'CLOSED', 1.1, ?, 1.1, ?, ?, ?)", id, sym, fmt.Sprintf("SUMH-%d", id), closed.Add(-time.Hour), closed,
			decimal.New(rng.Int64N(20000000)-10000000, -4).String(), ccy); err != nil {
			t.Fatal(err)
		}
	}
	testDB.Exec("ANALYZE TABLE `fx_deal`, `fx_position`")
}

// figuresOf writes a report's figures per currency and symbol, as the comparison reads them.
func figuresOf(rep pnl.Report) string {
	var sb strings.Builder
	for _, c := range rep.Currencies {
		for _, s := range c.Symbols {
			f := s.Figures
			fmt.Fprintf(&sb, "%s/%s: %s %s %s %s %s %s %s %s; ", c.Currency, s.Symbol, f.BBookRealised.StringFixed(3), f.MarkupBBook.StringFixed(3),
				f.MarkupABook.StringFixed(3), f.Commission.StringFixed(3), f.Swaps.StringFixed(3), f.NBPCost.StringFixed(3), f.HedgeBook.StringFixed(3), f.Total().StringFixed(3))
		}
	}
	return sb.String()
}

func seriesOf(hours []pnl.Point) string {
	var sb strings.Builder
	for _, h := range hours {
		if !h.Amount.IsZero() {
			fmt.Fprintf(&sb, "%s %s %s; ", h.Start.UTC().Format("01-02T15"), h.Amount.StringFixed(2), h.Cumulative.StringFixed(2))
		}
	}
	return sb.String()
}

type oldFigures struct {
	figures, hours string
	unrecorded     int64
	total          decimal.Decimal
}

// oldReport is the report as it was read before the summaries (its three statements as they
// were): every deal and opening of the range, hour by hour from its start.
func oldReport(ctx context.Context, db *sql.DB, from, to time.Time, m *book.Market) (oldFigures, error) {
	const (
		dealsSQL = "SELECT d.`currency`, COALESCE(d.`symbol`, '') AS sym, d.`type`, " +
			"CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, TIMESTAMPDIFF(HOUR, ?, d.`createdAt`) AS hr, " +
			"SUM(d.`amount`), SUM(COALESCE(d.`markup`, 0)), SUM(CASE WHEN d.`type` = 'PROFIT' AND d.`markup` IS NULL THEN 1 ELSE 0 END) " +
			"FROM `fx_deal` d LEFT JOIN `fx_position` p ON p.`id` = d.`positionId` " +
			"WHERE d.`createdAt` >= ? AND d.`createdAt` < ? AND (d.`type` IN ('PROFIT', 'COMMISSION', 'SWAP') " +
			"OR (d.`type` = 'ADJUSTMENT' AND d.`idempotencyKey` LIKE 'nbp:%')) " +
			"GROUP BY d.`currency`, sym, d.`type`, abook, hr"
		openingsSQL = "SELECT a.`currency`, p.`symbol`, CASE WHEN p.`venueTradeId` IS NULL THEN 0 ELSE 1 END AS abook, " +
			"TIMESTAMPDIFF(HOUR, ?, p.`openedAt`) AS hr, SUM(COALESCE(p.`markup`, 0)), SUM(CASE WHEN p.`markup` IS NULL THEN 1 ELSE 0 END) " +
			"FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` " +
			"WHERE p.`openedAt` >= ? AND p.`openedAt` < ? GROUP BY a.`currency`, p.`symbol`, abook, hr"
		hedgesSQL = "SELECT `plCurrency`, `symbol`, TIMESTAMPDIFF(HOUR, ?, `closedAt`) AS hr, SUM(`realizedPl`) FROM `fx_hedge_position` " +
			"WHERE `closedAt` >= ? AND `closedAt` < ? AND `status` = 'CLOSED' GROUP BY `plCurrency`, `symbol`, hr"
	)
	type k struct{ ccy, sym string }
	figs := map[k]*pnl.Figures{}
	at := func(ccy, sym string) *pnl.Figures {
		if figs[k{ccy, sym}] == nil {
			figs[k{ccy, sym}] = &pnl.Figures{}
		}
		return figs[k{ccy, sym}]
	}
	hours := map[string]map[int]decimal.Decimal{}
	hour := func(ccy string, h int, v decimal.Decimal) {
		if hours[ccy] == nil {
			hours[ccy] = map[int]decimal.Decimal{}
		}
		hours[ccy][h] = hours[ccy][h].Add(v)
	}
	var out oldFigures
	scan := func(query string, each func(*sql.Rows) error) error {
		rows, err := db.QueryContext(ctx, query, from, from, to)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := each(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	if err := scan(dealsSQL, func(rows *sql.Rows) error {
		var ccy, sym, typ string
		var abook, hr int
		var amount, markup decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &typ, &abook, &hr, &amount, &markup, &missing); err != nil {
			return err
		}
		f, desk := at(ccy, sym), amount.Neg()
		switch fx.DealType(typ) {
		case fx.DealProfit:
			out.unrecorded += missing
			if abook == 1 {
				f.MarkupABook = f.MarkupABook.Add(markup)
				hour(ccy, hr, markup)
				return nil
			}
			f.BBookRealised = f.BBookRealised.Add(desk)
			f.MarkupBBook = f.MarkupBBook.Add(markup)
		case fx.DealCommission:
			f.Commission = f.Commission.Add(desk)
		case fx.DealSwap:
			f.Swaps = f.Swaps.Add(desk)
		case fx.DealAdjustment:
			f.NBPCost = f.NBPCost.Add(amount)
		}
		hour(ccy, hr, desk)
		return nil
	}); err != nil {
		return out, err
	}
	if err := scan(openingsSQL, func(rows *sql.Rows) error {
		var ccy, sym string
		var abook, hr int
		var markup decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &abook, &hr, &markup, &missing); err != nil {
			return err
		}
		out.unrecorded += missing
		f := at(ccy, sym)
		if abook == 1 {
			f.MarkupABook = f.MarkupABook.Add(markup)
			hour(ccy, hr, markup)
		} else {
			f.MarkupBBook = f.MarkupBBook.Add(markup)
		}
		return nil
	}); err != nil {
		return out, err
	}
	if err := scan(hedgesSQL, func(rows *sql.Rows) error {
		var ccy, sym string
		var hr int
		var amount decimal.Decimal
		if err := rows.Scan(&ccy, &sym, &hr, &amount); err != nil {
			return err
		}
		amount = fx.RoundMoney(ccy, amount)
		f := at(ccy, sym)
		f.HedgeBook = f.HedgeBook.Add(amount)
		hour(ccy, hr, amount)
		return nil
	}); err != nil {
		return out, err
	}
	// As the report lists them: by currency, then symbol; the total converted per currency.
	rep := pnl.Report{}
	byCcy := map[string]*pnl.Currency{}
	var ccys []string
	for key, f := range figs {
		c := byCcy[key.ccy]
		if c == nil {
			c = &pnl.Currency{Currency: key.ccy}
			byCcy[key.ccy] = c
			ccys = append(ccys, key.ccy)
		}
		c.Symbols = append(c.Symbols, pnl.Symbol{Symbol: key.sym, Figures: *f})
		c.Total.BBookRealised = c.Total.BBookRealised.Add(f.Total())
	}
	slices.Sort(ccys)
	for _, ccy := range ccys {
		c := byCcy[ccy]
		slices.SortFunc(c.Symbols, func(x, y pnl.Symbol) int { return strings.Compare(x.Symbol, y.Symbol) })
		rep.Currencies = append(rep.Currencies, *c)
		v, ok := m.Convert(c.Total.BBookRealised, ccy, pnl.ReportingCurrency)
		if !ok {
			return out, fmt.Errorf("%s not converted", ccy)
		}
		out.total = out.total.Add(v)
	}
	out.figures = figuresOf(rep)
	n := int((to.Sub(from) + time.Hour - 1) / time.Hour)
	var series []pnl.Point
	run := decimal.Zero
	for h := range n {
		amount := decimal.Zero
		for ccy, byHour := range hours {
			if v, ok := byHour[h]; ok {
				c, _ := m.Convert(v, ccy, pnl.ReportingCurrency)
				amount = amount.Add(c)
			}
		}
		run = run.Add(amount)
		series = append(series, pnl.Point{Start: from.Add(time.Duration(h) * time.Hour), Amount: amount, Cumulative: run})
	}
	out.hours = seriesOf(series)
	return out, nil
}

// threeQuotes quotes the three symbols the random ledger trades, so every currency converts.
type threeQuotes struct{}

var threeMids = map[string]float64{"EURUSD": 1.2, "GBPUSD": 1.3, "USDJPY": 150}

func (threeQuotes) LastTick(s string) (tick.Quote, bool) {
	mid, ok := threeMids[s]
	return tick.Quote{Bid: mid, Ask: mid, ReceivedAt: time.Now()}, ok
}

func (threeQuotes) SymbolState(s string) tick.State {
	if _, ok := threeMids[s]; ok {
		return tick.Quoting
	}
	return tick.QuotingHalted
}
