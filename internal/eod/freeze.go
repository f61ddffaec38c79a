package eod

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// Alert codes.
const (
	// AlertReconciliation: a frozen balance does not follow from the previous one and the day's
	// deals.
	AlertReconciliation = "eod-reconciliation-failed"
	// AlertPricesMissing: a day passed whose closing prices nobody captured, so it is not frozen.
	AlertPricesMissing = "eod-prices-missing"
)

// Defaults.
const (
	DefaultBatch = 1000
	// DefaultOnTimeFor is how long after a rollover its day is still frozen as the book stands
	// (and its prices captured from the live view): the hourly swap run at 17:00 finishes well
	// inside it. Later, the day is rebuilt from the ledger as it stood at the rollover.
	DefaultOnTimeFor = 30 * time.Minute
)

// AlertInbox receives the end of day's alerts; *alert.Inbox satisfies it.
type AlertInbox interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// Config shapes a Job. DB is required.
type Config struct {
	DB *sql.DB
	// Prices is the live price view an on-time run captures the closing prices from; nil
	// captures nothing (the holder's recorder, or an earlier run, must have).
	Prices func() tick.Prices
	Alerts AlertInbox // nil: alerts are only logged
	// By names this process in what it captures and freezes (host:pid).
	By string
	// Batch is how many accounts one transaction freezes. Default DefaultBatch.
	Batch int
	// OnTimeFor: see DefaultOnTimeFor.
	OnTimeFor time.Duration
	// Now is the wall clock; default time.Now. A run's as-of instant says which days are due;
	// the wall clock says whether a day is frozen live or rebuilt.
	Now func() time.Time
}

// Job freezes the days due at a swap run.
type Job struct {
	cfg Config
	log *slog.Logger
}

// New returns the job.
func New(cfg Config, log *slog.Logger) *Job {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.OnTimeFor <= 0 {
		cfg.OnTimeFor = DefaultOnTimeFor
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.By == "" {
		cfg.By = "fxdesk"
	}
	return &Job{cfg: cfg, log: log}
}

// Run freezes every day of due (weekday rollovers at or before at, oldest first, as the swap
// job charged them) that is not frozen yet, then checks the frozen days of due. Its counts go
// into res: daysFrozen, accountsFrozen, daysUnpriced, pricesCaptured, unreconciled.
func (j *Job) Run(ctx context.Context, at time.Time, due []fx.Rollover, res schedule.Result) error {
	if len(due) == 0 {
		return nil
	}
	last := due[len(due)-1]
	// Only a run at the rollover captures: the as-of instant says the run is for it, and the
	// wall clock says the live prices are still its close (a run replayed later with an old --at
	// must not record today's prices as that day's).
	if j.cfg.Prices != nil && !at.Before(last.At) && at.Sub(last.At) < j.cfg.OnTimeFor && j.cfg.Now().Sub(last.At) < j.cfg.OnTimeFor {
		n, err := Capture(ctx, j.cfg.DB, last, j.cfg.Prices(), j.cfg.By)
		if err != nil {
			return err
		}
		res["pricesCaptured"] += n
	}
	var first sql.NullString
	if err := j.cfg.DB.QueryRowContext(ctx, "SELECT DATE_FORMAT(MIN(`tradingDay`), '%Y-%m-%d') FROM `fx_eod_price`").Scan(&first); err != nil {
		return fmt.Errorf("end of day: first captured day: %w", err)
	}
	var missing []string
	for _, day := range due {
		done, err := j.frozen(ctx, day.Date)
		if err != nil {
			return err
		}
		if done {
			continue
		}
		closing, err := LoadClosing(ctx, j.cfg.DB, day.Date)
		if err != nil {
			return err
		}
		if len(closing.Prices) == 0 {
			// Before the first capture the desk was not recording closes: nothing is owed.
			if first.Valid && day.Date > first.String {
				missing = append(missing, day.Date)
				res["daysUnpriced"]++
			}
			continue
		}
		n, err := j.freeze(ctx, day, closing)
		if err != nil {
			return err
		}
		res["daysFrozen"]++
		res["accountsFrozen"] += n
	}
	j.reportMissing(ctx, missing)
	started := time.Now()
	bad, err := Reconcile(ctx, j.cfg.DB, due[0].Date, last.Date)
	if err != nil {
		return err
	}
	// Every run checks the frozen days of the whole week again: its time grows with the
	// accounts, so it is logged beside the freeze's.
	j.log.InfoContext(ctx, "end of day reconciled", slog.String("from", due[0].Date), slog.String("to", last.Date),
		slog.Int("unreconciled", len(bad)), slog.Duration("took", time.Since(started)))
	res["unreconciled"] = len(bad)
	j.reportReconciliation(ctx, bad)
	return nil
}

func (j *Job) frozen(ctx context.Context, day string) (bool, error) {
	var n int
	err := j.cfg.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_eod_day` WHERE `tradingDay` = ?", day).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("end of day %s: %w", day, err)
	}
	return n > 0, nil
}

// cut is where a day's freeze reads the book: live, or as the ledger stood at the rollover.
type cut struct {
	day    fx.Rollover
	onTime bool
}

// at is the rollover instant as the time columns hold it.
func (c cut) at() time.Time { return c.day.At.UTC() }

// positions is a derived table of the positions the day's book holds — id, accountId, symbol,
// side, external (at the venue), openPrice, openedAt, v (volume) — for the accounts in, or every
// account when in is empty. A rebuilt day takes the positions open at the rollover at their
// volume then: today's volume plus what closes took off it since. A statement's positions open
// at its closing rollover are the rebuilt day's, whenever the day was frozen. "Closed since" names
// the status as well as closedAt so that, for given accounts, the positions are two ranges of
// idx_fx_position_account_closed rather than every position the accounts ever had.
func (c cut) positions(in string) (string, []any) {
	filter := ""
	if in != "" {
		filter = " AND `accountId` IN (" + in + ")"
	}
	if c.onTime {
		return "(SELECT `id`, `accountId`, `symbol`, `side`, `venueTradeId` IS NOT NULL AS `external`, `openPrice`, `openedAt`, `volume` AS `v` " +
			"FROM `fx_position` WHERE `status` = 'OPEN'" + filter + ") p", nil
	}
	return "(SELECT ps.`id`, ps.`accountId`, ps.`symbol`, ps.`side`, ps.`venueTradeId` IS NOT NULL AS `external`, ps.`openPrice`, ps.`openedAt`, " +
			"ps.`volume` + COALESCE((SELECT SUM(d.`volume`) FROM `fx_deal` d WHERE d.`positionId` = ps.`id` AND d.`type` = 'PROFIT' " +
			"AND d.`createdAt` >= ? LIMIT 1), 0) AS `v` FROM `fx_position` ps WHERE ps.`openedAt` < ? AND (ps.`status` = 'OPEN' OR (ps.`status` = 'CLOSED' AND ps.`closedAt` >= ?))" +
			strings.ReplaceAll(filter, "`accountId`", "ps.`accountId`") + ") p",
		[]any{c.at(), c.at(), c.at()}
}

// accountRow is one account's frozen figures.
type accountRow struct {
	a                 book.Account
	through           int64
	m                 book.Metrics
	priced            bool
	positions, orders int
	exposures         []book.Exposure
}

const insertAccounts = "INSERT INTO `fx_eod_account` (`tradingDay`, `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, " +
	"`floatingPnl`, `openPositions`, `pendingOrders`, `throughDealId`) VALUES "
const insertAccountsTail = " ON DUPLICATE KEY UPDATE `accountId` = `accountId`"

// freeze writes day's rows at closing's prices and returns how many accounts it froze.
func (j *Job) freeze(ctx context.Context, day fx.Rollover, closing *Closing) (int, error) {
	c := cut{day: day, onTime: j.cfg.Now().Before(day.At.Add(j.cfg.OnTimeFor))}
	conv, err := book.NewConverter(ctx, j.cfg.DB, closing)
	if err != nil {
		return 0, err
	}
	started := time.Now()
	frozen := 0
	var after int64
	for {
		n, last, err := j.freezeBatch(ctx, c, conv, after)
		if err != nil {
			return frozen, err
		}
		if last == 0 {
			break
		}
		frozen += n
		after = last
	}
	if err := j.freezeDesk(ctx, c, closing); err != nil {
		return frozen, err
	}
	mode := "CAUGHT_UP"
	if c.onTime {
		mode = "ON_TIME"
	}
	var accounts int
	if err := j.cfg.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_eod_account` WHERE `tradingDay` = ?", day.Date).Scan(&accounts); err != nil {
		return frozen, fmt.Errorf("end of day %s: count: %w", day.Date, err)
	}
	if _, err := j.cfg.DB.ExecContext(ctx, insertDay, day.Date, c.at(), mode, accounts, j.cfg.By); err != nil {
		return frozen, fmt.Errorf("end of day %s: %w", day.Date, err)
	}
	if now := j.cfg.Now(); now.Before(day.At) {
		// A run as of an instant ahead of the clock (a test, a soak): its day is frozen for good
		// with today's book and prices (docs/eod.md, «Late and missed days»).
		j.log.WarnContext(ctx, "end of day frozen ahead of the clock", slog.String("tradingDay", day.Date), slog.Time("rolloverAt", day.At), slog.Time("now", now))
	}
	j.log.InfoContext(ctx, "end of day frozen", slog.String("tradingDay", day.Date), slog.String("mode", mode),
		slog.Int("accounts", accounts), slog.Int("frozenByThisRun", frozen), slog.Int("prices", len(closing.Prices)),
		slog.Duration("took", time.Since(started)))
	return frozen, nil
}

const insertDay = "INSERT INTO `fx_eod_day` (`tradingDay`, `rolloverAt`, `mode`, `accounts`, `frozenBy`) VALUES (?, ?, ?, ?, ?) " +
	"ON DUPLICATE KEY UPDATE `tradingDay` = `tradingDay`"

// freezeBatch freezes the next accounts after id after that have no row for the day, in one
// transaction whose reads are one consistent view: an account's balance, its last deal, its
// positions and its orders are of the same instant. last is the batch's last account id, 0 when
// none was left.
func (j *Job) freezeBatch(ctx context.Context, c cut, conv *book.Converter, after int64) (n int, last int64, err error) {
	tx, err := j.cfg.DB.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return 0, 0, fmt.Errorf("end of day %s: begin: %w", c.day.Date, err)
	}
	defer tx.Rollback()
	rows, err := j.readAccounts(ctx, tx, c, after)
	if err != nil || len(rows) == 0 {
		return 0, 0, err
	}
	last = rows[len(rows)-1].a.ID
	ids := make([]any, len(rows))
	byID := make(map[int64]*accountRow, len(rows))
	for i := range rows {
		ids[i] = rows[i].a.ID
		byID[rows[i].a.ID] = &rows[i]
	}
	in := store.Placeholders(len(ids))
	from, fargs := c.positions(in)
	q, err := tx.QueryContext(ctx, "SELECT p.`accountId`, p.`symbol`, p.`side`, COUNT(*), SUM(p.`v`), SUM(p.`v` * p.`openPrice`) FROM "+from+
		" WHERE p.`v` > 0 GROUP BY p.`accountId`, p.`symbol`, p.`side`", append(fargs, ids...)...)
	if err != nil {
		return 0, 0, fmt.Errorf("end of day %s: positions: %w", c.day.Date, err)
	}
	for q.Next() {
		var id int64
		var e book.Exposure
		var side string
		var count int
		if err := q.Scan(&id, &e.Symbol, &side, &count, &e.Volume, &e.VolumePrice); err != nil {
			q.Close()
			return 0, 0, fmt.Errorf("end of day %s: positions: %w", c.day.Date, err)
		}
		e.Side = fx.Side(side)
		r := byID[id]
		r.exposures = append(r.exposures, e)
		r.positions += count
	}
	q.Close()
	if err := q.Err(); err != nil {
		return 0, 0, fmt.Errorf("end of day %s: positions: %w", c.day.Date, err)
	}
	if err := j.countOrders(ctx, tx, c, in, ids, byID); err != nil {
		return 0, 0, err
	}

	var sb strings.Builder
	args := make([]any, 0, len(rows)*11)
	for i := range rows {
		r := &rows[i]
		r.m, r.priced = conv.Marks(r.a, r.a.Balance, r.exposures)
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, c.day.Date, r.a.ID, r.a.Currency, r.a.Balance)
		if r.priced {
			args = append(args, r.m.Equity, r.m.UsedMargin, r.m.FreeMargin, r.m.Equity.Sub(r.a.Balance))
		} else {
			args = append(args, nil, nil, nil, nil)
		}
		args = append(args, r.positions, r.orders, r.through)
	}
	if _, err := tx.ExecContext(ctx, insertAccounts+sb.String()+insertAccountsTail, args...); err != nil {
		return 0, 0, fmt.Errorf("end of day %s: write accounts: %w", c.day.Date, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("end of day %s: commit accounts: %w", c.day.Date, err)
	}
	return len(rows), last, nil
}

// readAccounts reads the batch's accounts with the balance and last deal the day closes on: now,
// or (rebuilt) the last deal before the rollover, for the accounts that existed then.
func (j *Job) readAccounts(ctx context.Context, tx *sql.Tx, c cut, after int64) ([]accountRow, error) {
	var q string
	var args []any
	// The accounts the day already holds are passed over by a join on the day's primary key,
	// one lookup per account: for a NOT EXISTS, MariaDB gathers all of the day's rows into a
	// temporary table for every batch, so each batch would cost more than the one before.
	//
	// An account's last deal is its newest (accountId, id) index entry (before the rollover,
	// when rebuilt), read with ORDER BY id DESC LIMIT 1: a correlated MAX(id) reads every deal
	// the account ever had, a cost that would grow with the ledger's age.
	if c.onTime {
		q = "SELECT a.`id`, a.`accountGroup`, a.`currency`, a.`leverage`, a.`balance`, " +
			"COALESCE((SELECT d.`id` FROM `fx_deal` d WHERE d.`accountId` = a.`id` ORDER BY d.`id` DESC LIMIT 1), 0) FROM `fx_account` a " +
			"LEFT JOIN `fx_eod_account` s ON s.`tradingDay` = ? AND s.`accountId` = a.`id` " +
			"WHERE a.`id` > ? AND s.`accountId` IS NULL ORDER BY a.`id` LIMIT ?"
		args = []any{c.day.Date, after, j.cfg.Batch}
	} else {
		q = "SELECT a.`id`, a.`accountGroup`, a.`currency`, a.`leverage`, " +
			"COALESCE((SELECT d.`balanceAfter` FROM `fx_deal` d WHERE d.`accountId` = a.`id` AND d.`createdAt` < ? ORDER BY d.`id` DESC LIMIT 1), 0), " +
			"COALESCE((SELECT d.`id` FROM `fx_deal` d WHERE d.`accountId` = a.`id` AND d.`createdAt` < ? ORDER BY d.`id` DESC LIMIT 1), 0) FROM `fx_account` a " +
			"LEFT JOIN `fx_eod_account` s ON s.`tradingDay` = ? AND s.`accountId` = a.`id` " +
			"WHERE a.`id` > ? AND a.`createdAt` < ? AND s.`accountId` IS NULL ORDER BY a.`id` LIMIT ?"
		args = []any{c.at(), c.at(), c.day.Date, after, c.at(), j.cfg.Batch}
	}
	return store.QueryAll(ctx, tx, "end of day "+c.day.Date+": accounts", func(sc store.Scanner) (accountRow, error) {
		var r accountRow
		err := sc.Scan(&r.a.ID, &r.a.Group, &r.a.Currency, &r.a.Leverage, &r.a.Balance, &r.through)
		return r, err
	}, q, args...)
}

// countOrders counts each account's resting orders: now, or (rebuilt) those placed before the
// rollover and still resting then — pending now, or finished since.
func (j *Job) countOrders(ctx context.Context, tx *sql.Tx, c cut, in string, ids []any, byID map[int64]*accountRow) error {
	q := "SELECT `accountId`, COUNT(*) FROM `fx_order` WHERE `accountId` IN (" + in + ") AND `status` = 'PENDING' GROUP BY `accountId`"
	args := ids
	if !c.onTime {
		q = "SELECT `accountId`, COUNT(*) FROM `fx_order` WHERE `accountId` IN (" + in + ") AND `type` <> 'MARKET' AND `createdAt` < ? " +
			"AND (`status` = 'PENDING' OR (`status` IN ('FILLED', 'CANCELLED', 'EXPIRED') AND `updatedAt` >= ?)) GROUP BY `accountId`"
		args = append(append([]any{}, ids...), c.at(), c.at())
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("end of day %s: orders: %w", c.day.Date, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return fmt.Errorf("end of day %s: orders: %w", c.day.Date, err)
		}
		byID[id].orders = n
	}
	return rows.Err()
}
