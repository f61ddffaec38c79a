package pnl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
)

// The summaries (migration 000034, docs/pnl.md «Summaries»): the report's groups per clock hour
// (fx_pnl_hour), per trading day (fx_pnl_day) and its series per hour (fx_pnl_series), up to
// fx_pnl_summary.through. Deals and openings never change once committed, so an hour summed
// once stays right; what must be waited for is an hour's last commit (closedHour).

// SummaryMargin is how long after its end an hour waits before it is summed, beside the oldest
// open transaction (closedHour): a deal's createdAt is the database clock at its INSERT, and
// its transaction may commit later. Writers commit within seconds (the group commit's batch is
// bounded at 30 s, HTTP writes by the server's write deadline); the margin covers them where the
// open transactions cannot be read (no PROCESS privilege, another Galera node).
const SummaryMargin = 10 * time.Minute

// span is [from, to) in UTC; empty when from is not before to.
type span struct{ from, to time.Time }

func (s span) empty() bool { return !s.from.Before(s.to) }

// plan is where a report over [from, to) reads each part of its range.
type plan struct {
	base       time.Time // the clock hour from falls in: the series' hour 0
	live       [2]span   // from the ledger and the openings: the partial hours, and what is not summarised yet
	hours      [2]span   // whole hours from fx_pnl_hour, either side of days
	days       span      // whole trading days from fx_pnl_day (their dayStart in it)
	summarised span      // the series from fx_pnl_series: hours ∪ days
}

// planOf splits [from, to) given the summaries reach through (zero: none yet). It is pure.
func planOf(from, to, through time.Time) (plan, error) {
	p := plan{base: from.Truncate(time.Hour)}
	a := p.base
	if a.Before(from) {
		a = a.Add(time.Hour)
	}
	z := to.Truncate(time.Hour)
	if through.Before(z) {
		z = through
	}
	if !a.Before(z) {
		p.live[0] = span{from, to}
		return p, nil
	}
	p.live = [2]span{{from, a}, {z, to}}
	p.summarised = span{a, z}
	first, err := fx.LastRollover(a)
	if err != nil {
		return plan{}, err
	}
	d0 := first.At.UTC()
	if d0.Before(a) {
		d0 = first.Next().At.UTC()
	}
	last, err := fx.LastRollover(z)
	if err != nil {
		return plan{}, err
	}
	if d1 := last.At.UTC(); d0.Before(d1) {
		p.days = span{d0, d1}
		p.hours = [2]span{{a, d0}, {d1, z}}
	} else {
		p.hours[0] = span{a, z}
	}
	return p, nil
}

// summarisedThrough is how far the summaries reach (zero: not at all).
func summarisedThrough(ctx context.Context, db *sql.DB) (time.Time, error) {
	var through sql.NullTime
	err := db.QueryRowContext(ctx, "SELECT `through` FROM `fx_pnl_summary` WHERE `id` = 1").Scan(&through)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, fmt.Errorf("dealer's P&L: summaries: %w", err)
	}
	// On the hour, as the summariser writes it; an operator's rewind to within an hour leaves
	// that hour to the ledger.
	return through.Time.UTC().Truncate(time.Hour), nil
}

// summaryDaysSQL sums the trading days' figures per currency and symbol over a span of their
// start; summaryHoursSQL the hours' groups over two spans. The primary keys' ranges serve both.
const (
	summaryDaysSQL = "SELECT `currency`, `symbol`, SUM(`profitBBook`), SUM(`markupBBook`), SUM(`markupABook`), SUM(`commission`), SUM(`swaps`), " +
		"SUM(`nbp`), SUM(`unrecorded`) FROM `fx_pnl_day` WHERE `dayStart` >= ? AND `dayStart` < ? GROUP BY `currency`, `symbol`"
	summaryHoursSQL = "SELECT `currency`, `symbol`, `kind`, `abook`, SUM(`amount`), SUM(`markup`), SUM(`unrecorded`) FROM `fx_pnl_hour` " +
		"WHERE (`hour` >= ? AND `hour` < ?) OR (`hour` >= ? AND `hour` < ?) GROUP BY `currency`, `symbol`, `kind`, `abook`"
)

// summaryDays adds the figures of the whole trading days (their series comes from
// fx_pnl_series), with apply's signs: the desk's side of the traders' deals.
func (a *accumulator) summaryDays(ctx context.Context, db *sql.DB, s span, unrecorded *int64) error {
	if s.empty() {
		return nil
	}
	rows, err := db.QueryContext(ctx, summaryDaysSQL, s.from, s.to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: daily summaries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy, sym string
		var profit, markupB, markupA, commission, swaps, nbp decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &profit, &markupB, &markupA, &commission, &swaps, &nbp, &missing); err != nil {
			return fmt.Errorf("dealer's P&L: daily summaries: %w", err)
		}
		f := a.at(ccy, sym)
		f.BBookRealised = f.BBookRealised.Sub(profit)
		f.MarkupBBook = f.MarkupBBook.Add(markupB)
		f.MarkupABook = f.MarkupABook.Add(markupA)
		f.Commission = f.Commission.Sub(commission)
		f.Swaps = f.Swaps.Sub(swaps)
		f.NBPCost = f.NBPCost.Add(nbp)
		*unrecorded += missing
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: daily summaries: %w", err)
	}
	return nil
}

// summaryHours adds the figures of the summarised hours' groups.
func (a *accumulator) summaryHours(ctx context.Context, db *sql.DB, s0, s1 span, unrecorded *int64) error {
	if s0.empty() && s1.empty() {
		return nil
	}
	rows, err := db.QueryContext(ctx, summaryHoursSQL, s0.from, s0.to, s1.from, s1.to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: hourly summaries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy, sym, kind string
		var abook int
		var amount, markup decimal.Decimal
		var missing int64
		if err := rows.Scan(&ccy, &sym, &kind, &abook, &amount, &markup, &missing); err != nil {
			return fmt.Errorf("dealer's P&L: hourly summaries: %w", err)
		}
		a.apply(ccy, sym, kind, abook == 1, amount, markup, missing, unrecorded)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: hourly summaries: %w", err)
	}
	return nil
}

const summarySeriesSQL = "SELECT `currency`, TIMESTAMPDIFF(HOUR, ?, `hour`), `amount` FROM `fx_pnl_series` WHERE `hour` >= ? AND `hour` < ?"

// summarySeries adds the summarised hours' series.
func (a *accumulator) summarySeries(ctx context.Context, db *sql.DB, s span) error {
	if s.empty() {
		return nil
	}
	rows, err := db.QueryContext(ctx, summarySeriesSQL, a.base, s.from, s.to)
	if err != nil {
		return fmt.Errorf("dealer's P&L: summaries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ccy string
		var hr int
		var amount decimal.Decimal
		if err := rows.Scan(&ccy, &hr, &amount); err != nil {
			return fmt.Errorf("dealer's P&L: summaries: %w", err)
		}
		a.hour(ccy, hr, amount)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dealer's P&L: summaries: %w", err)
	}
	return nil
}

// The summariser's statements. Each chunk is at most one trading day of hours, summed by one
// statement for its deals and one for its openings over their time indexes.
const (
	summaryCursorSQL = "SELECT `through` FROM `fx_pnl_summary` WHERE `id` = 1 FOR UPDATE"
	summaryCreateSQL = "INSERT INTO `fx_pnl_summary` (`id`, `through`) VALUES (1, NULL) ON DUPLICATE KEY UPDATE `id` = `id`"
	summaryAdvance   = "UPDATE `fx_pnl_summary` SET `through` = ? WHERE `id` = 1"

	// closedHourSQL is the database clock; oldestTrxSQL the start of the oldest transaction open
	// on this database (the sessions using it: the server's other databases do not hold the
	// summaries back), in UTC — INNODB_TRX shows the server's own zone. NULL: none, or not
	// readable here.
	closedHourSQL = "SELECT NOW(3)"
	oldestTrxSQL  = "SELECT CONVERT_TZ(MIN(t.`trx_started`), 'SYSTEM', '+00:00') FROM `information_schema`.`INNODB_TRX` t " +
		"JOIN `information_schema`.`PROCESSLIST` c ON c.`ID` = t.`trx_mysql_thread_id` WHERE c.`DB` = DATABASE()"
	firstDataSQL   = "SELECT (SELECT `createdAt` FROM `fx_deal` WHERE `createdAt` >= ? ORDER BY `createdAt` LIMIT 1), (SELECT `openedAt` FROM `fx_position` WHERE `openedAt` >= ? ORDER BY `openedAt` LIMIT 1)"
	clearHoursSQL  = "DELETE FROM `fx_pnl_hour` WHERE `hour` >= ? AND `hour` < ?"
	clearSeriesSQL = "DELETE FROM `fx_pnl_series` WHERE `hour` >= ? AND `hour` < ?"
	clearDaySQL    = "DELETE FROM `fx_pnl_day` WHERE `dayStart` = ?"
	summariseDeals = "INSERT INTO `fx_pnl_hour` (`currency`, `symbol`, `kind`, `abook`, `hour`, `amount`, `markup`, `unrecorded`) " +
		"SELECT " + dealGroupCols + "CAST(? AS DATETIME) + INTERVAL TIMESTAMPDIFF(HOUR, ?, d.`createdAt`) HOUR AS hr, " + dealGroupSums +
		"d.`createdAt` >= ? AND d.`createdAt` < ?" + dealGroupFilter
	summariseOpenings = "INSERT INTO `fx_pnl_hour` (`currency`, `symbol`, `kind`, `abook`, `hour`, `amount`, `markup`, `unrecorded`) " +
		"SELECT " + openingGroupCols + "CAST(? AS DATETIME) + INTERVAL TIMESTAMPDIFF(HOUR, ?, p.`openedAt`) HOUR AS hr, " + openingGroupSums +
		"p.`openedAt` >= ? AND p.`openedAt` < ?" + openingGroupBy
	// summariseSeries is accumulator.apply's share of the series, in SQL.
	summariseSeries = "INSERT INTO `fx_pnl_series` (`hour`, `currency`, `amount`) SELECT `hour`, `currency`, " +
		"SUM(CASE WHEN `kind` IN ('PROFIT', 'OPEN') AND `abook` = 1 THEN `markup` WHEN `kind` = 'OPEN' THEN 0 ELSE -`amount` END) " +
		"FROM `fx_pnl_hour` WHERE `hour` >= ? AND `hour` < ? GROUP BY `hour`, `currency`"
	// summariseDay folds a trading day's hours into its figures per currency and symbol, as
	// accumulator.apply counts each kind and book.
	summariseDay = "INSERT INTO `fx_pnl_day` (`dayStart`, `currency`, `symbol`, `profitBBook`, `markupBBook`, `markupABook`, `commission`, `swaps`, `nbp`, `unrecorded`) " +
		"SELECT ?, `currency`, `symbol`, SUM(CASE WHEN `kind` = 'PROFIT' AND `abook` = 0 THEN `amount` ELSE 0 END), " +
		"SUM(CASE WHEN `kind` IN ('PROFIT', 'OPEN') AND `abook` = 0 THEN `markup` ELSE 0 END), " +
		"SUM(CASE WHEN `kind` IN ('PROFIT', 'OPEN') AND `abook` = 1 THEN `markup` ELSE 0 END), " +
		"SUM(CASE WHEN `kind` = 'COMMISSION' THEN `amount` ELSE 0 END), SUM(CASE WHEN `kind` = 'SWAP' THEN `amount` ELSE 0 END), " +
		"SUM(CASE WHEN `kind` = 'NBP' THEN `amount` ELSE 0 END), SUM(CASE WHEN `kind` IN ('PROFIT', 'OPEN') THEN `unrecorded` ELSE 0 END) " +
		"FROM `fx_pnl_hour` WHERE `hour` >= ? AND `hour` < ? GROUP BY `currency`, `symbol`"
)

// Summarise brings the desk's incremental P&L summaries up to through (what a range report reads
// instead of re-aggregating deals) and returns how many hours it summarised. The generator calls
// it after filling a database; the scheduler's job (Job) calls it as the day goes.
//
// Only closed hours are summed: ended before through, before the database clock less
// SummaryMargin, and before the oldest open transaction started (a deal not committed yet was
// inserted after its transaction began). Each chunk — the hours up to the next 17:00 New York,
// then the trading day it closes — commits with the cursor it advances, under the cursor row's
// lock: two processes summarising at once take turns, and the second finds the work done. The
// transactions read at READ COMMITTED, so INSERT … SELECT takes no lock on the ledger's rows or
// gaps (a fill committing meanwhile never waits for it; on MySQL 8 this needs the default
// row-based binary log).
func Summarise(ctx context.Context, db *sql.DB, through time.Time) (int, error) {
	if _, err := db.ExecContext(ctx, summaryCreateSQL); err != nil {
		return 0, fmt.Errorf("summarise P&L: %w", err)
	}
	n := 0
	for {
		hours, done, err := summariseChunk(ctx, db, through.UTC())
		n += hours
		if err != nil || done {
			return n, err
		}
	}
}

// summariseChunk sums the next chunk of closed hours; done when nothing is left.
func summariseChunk(ctx context.Context, db *sql.DB, through time.Time) (int, bool, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, false, fmt.Errorf("summarise P&L: %w", err)
	}
	defer tx.Rollback()
	var cursor sql.NullTime
	if err := tx.QueryRowContext(ctx, summaryCursorSQL).Scan(&cursor); err != nil {
		return 0, false, fmt.Errorf("summarise P&L: cursor: %w", err)
	}
	limit, err := closedHour(ctx, tx, through)
	if err != nil {
		return 0, false, err
	}
	// From the cursor, skipping whole trading days without a deal or an opening: from the
	// start of the day of the first one.
	start := cursor.Time.UTC().Truncate(time.Hour) // an operator's rewind within an hour redoes the hour
	if !cursor.Valid {
		start = time.Unix(0, 0).UTC()
	}
	if day, err := fx.LastRollover(start); err != nil {
		return 0, false, err
	} else if !cursor.Valid || day.At.Equal(start) {
		var deal, opening sql.NullTime
		if err := tx.QueryRowContext(ctx, firstDataSQL, start, start).Scan(&deal, &opening); err != nil {
			return 0, false, fmt.Errorf("summarise P&L: first rows: %w", err)
		}
		first := limit
		for _, t := range []sql.NullTime{deal, opening} {
			if t.Valid && t.Time.Before(first) {
				first = t.Time.UTC()
			}
		}
		skip, err := fx.LastRollover(first)
		if err != nil {
			return 0, false, err
		}
		if s := skip.At.UTC(); s.After(start) || !cursor.Valid {
			start = s
		}
	}
	if !start.Before(limit) {
		return 0, true, tx.Commit()
	}
	day, err := fx.LastRollover(start)
	if err != nil {
		return 0, false, err
	}
	dayEnd := day.Next().At.UTC()
	end := dayEnd
	if limit.Before(end) {
		end = limit
	}
	for _, st := range []struct {
		query string
		args  []any
	}{
		{clearHoursSQL, []any{start, end}},
		{clearSeriesSQL, []any{start, end}},
		{summariseDeals, []any{start, start, start, end}},
		{summariseOpenings, []any{start, start, start, end}},
		{summariseSeries, []any{start, end}},
	} {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return 0, false, fmt.Errorf("summarise P&L: hours from %s: %w", start.Format(time.RFC3339), err)
		}
	}
	if end.Equal(dayEnd) {
		dayStart := day.At.UTC()
		if _, err := tx.ExecContext(ctx, clearDaySQL, dayStart); err != nil {
			return 0, false, fmt.Errorf("summarise P&L: day %s: %w", day.Date, err)
		}
		if _, err := tx.ExecContext(ctx, summariseDay, dayStart, dayStart, dayEnd); err != nil {
			return 0, false, fmt.Errorf("summarise P&L: day %s: %w", day.Date, err)
		}
	}
	if _, err := tx.ExecContext(ctx, summaryAdvance, end); err != nil {
		return 0, false, fmt.Errorf("summarise P&L: advance: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("summarise P&L: %w", err)
	}
	return int(end.Sub(start) / time.Hour), false, nil
}

// closedHour is the end of the last hour that may be summed: before through and before
// committedBefore (our own transaction is a moment old).
func closedHour(ctx context.Context, tx *sql.Tx, through time.Time) (time.Time, error) {
	limit, err := committedBefore(ctx, tx, SummaryMargin)
	if err != nil {
		return time.Time{}, fmt.Errorf("summarise P&L: %w", err)
	}
	if through.Before(limit) {
		limit = through
	}
	return limit.Truncate(time.Hour), nil
}

// committedBefore is a time before which every deal and opening is committed, as far as this
// database can tell: read from now on, the ledger before it holds every row it ever will. It is
// the database clock less margin, or, if earlier, a second before the oldest transaction open on
// the desk's database began — a row not committed yet was inserted after its transaction began
// (INNODB_TRX shows whole seconds, and an INSERT's clock is read as its statement starts, a
// moment before InnoDB starts a transaction it opens). The margin covers writers whose
// transactions cannot be read here (no PROCESS privilege, another Galera node), and those begun
// since the server last refreshed its copy of the list (a read 0.1 s or more after the previous
// read refreshes it). The summaries and the recent ledger's reading (Marks) bound their reads by
// it alike.
func committedBefore(ctx context.Context, q store.Queryer, margin time.Duration) (time.Time, error) {
	scanTime := func(sc store.Scanner) (sql.NullTime, error) {
		var t sql.NullTime
		return t, sc.Scan(&t)
	}
	now, err := store.QueryAll(ctx, q, "database clock", scanTime, closedHourSQL)
	if err != nil {
		return time.Time{}, err
	}
	if len(now) != 1 || !now[0].Valid {
		return time.Time{}, fmt.Errorf("database clock: %d rows", len(now))
	}
	limit := now[0].Time.UTC().Add(-margin)
	// Without the PROCESS privilege the table is empty or refused: the margin alone then.
	if oldest, err := store.QueryAll(ctx, q, "open transactions", scanTime, oldestTrxSQL); err == nil && len(oldest) == 1 && oldest[0].Valid {
		if started := oldest[0].Time.UTC().Add(-time.Second); started.Before(limit) {
			limit = started
		}
	}
	return limit, nil
}

// How the scheduler runs Summarise, in fxdesk-cron and inline in fxdesk-web alike (beside the
// money jobs, swaps.MoneyJobs): a run costs the hours closed since the last one — usually none
// or one — and two runs at once take turns on the cursor's lock.
const (
	JobName = "summariseFxPnl"
	JobSpec = "*/5 * * * *"
	// JobComment is the job's line on the status page.
	JobComment = "every 5 min: sum the dealer's P&L of each closed hour and trading day once (the summaries long ranges read)"
)

// Job is the scheduled run: the summaries up to at.
func Job(db *sql.DB) schedule.Job {
	return schedule.Job{Name: JobName, Spec: JobSpec, Comment: JobComment, Run: func(ctx context.Context, at time.Time) (schedule.Result, error) {
		n, err := Summarise(ctx, db, at)
		return schedule.Result{"hours": n}, err
	}}
}
