package swaps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
	"fxdesk/internal/trading"
)

// AlertExpired is raised when a pending charge expires uncharged.
const AlertExpired = "swap-charge-expired"

// Defaults.
const (
	DefaultBatch       = 500
	DefaultExpireAfter = 7 * 24 * time.Hour
)

// Pinner asks for conversion legs this process has no mid for. In fxdesk-cron it is the quote
// mirror follower (the leader subscribes them); inline it hands them to the tick engine. Each
// run calls it once with every leg its pending charges still need (possibly none).
type Pinner interface {
	Pin(ctx context.Context, legs ...string) error
}

// AlertInbox receives swap-charge-expired; *alert.Inbox satisfies it.
type AlertInbox interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
}

// Config shapes a Job. DB and Prices are required.
type Config struct {
	DB     *sql.DB
	Prices func() trading.Prices // the price view at the start of a run
	Pins   Pinner                // nil: nothing is pinned
	Alerts AlertInbox            // nil: expiries are only logged
	// Batch is how many positions one transaction settles. Default DefaultBatch.
	Batch int
	// ExpireAfter is how long a pending charge is retried, and how far back a run looks for
	// missed rollovers. Default DefaultExpireAfter (7 days).
	ExpireAfter time.Duration
}

// Job is processFxSwaps.
type Job struct {
	cfg Config
	log *slog.Logger
}

// New returns the job.
func New(cfg Config, log *slog.Logger) *Job {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.ExpireAfter <= 0 {
		cfg.ExpireAfter = DefaultExpireAfter
	}
	return &Job{cfg: cfg, log: log}
}

// run is one run's state.
type run struct {
	*Job
	at    time.Time
	conv  *trading.Converter
	res   schedule.Result
	legs  map[string]bool
	batch int // batches committed, for the per-batch log line
}

// Run charges every rollover due at at (DESIGN §7), each position every due date it held, in one
// pass. It returns counts, per position and date unless said: charged (new deals), pending
// (parked for want of a conversion), retried (pending charges now charged), expired, swapFree and
// zero (settled without a deal), skipped (positions found with nothing left under lock: another
// run got there first, or closed), dates (rollover dates due).
func (j *Job) Run(ctx context.Context, at time.Time) (schedule.Result, error) {
	var prices trading.Prices
	if j.cfg.Prices != nil {
		prices = j.cfg.Prices()
	}
	conv, err := trading.NewConverter(ctx, j.cfg.DB, prices)
	if err != nil {
		return nil, err
	}
	r := &run{Job: j, at: at, conv: conv, res: schedule.Result{}, legs: map[string]bool{}}
	if err := r.expire(ctx); err != nil {
		return r.res, err
	}
	if err := r.retryPending(ctx); err != nil {
		return r.res, err
	}
	due, err := DueRollovers(at, j.cfg.ExpireAfter)
	if err != nil {
		return r.res, fmt.Errorf("swaps: due rollovers: %w", err)
	}
	r.res["dates"] = len(due)
	if len(due) > 0 {
		if err := r.chargeDue(ctx, due); err != nil {
			return r.res, err
		}
	}
	r.pin(ctx)
	return r.res, nil
}

func (r *run) pin(ctx context.Context) {
	if r.cfg.Pins == nil {
		return
	}
	legs := make([]string, 0, len(r.legs))
	for s := range r.legs {
		legs = append(legs, s)
	}
	slices.Sort(legs)
	if err := r.cfg.Pins.Pin(ctx, legs...); err != nil {
		r.log.WarnContext(ctx, "swaps: cannot pin conversion legs; pending charges wait for them", slog.Any("legs", legs), slog.Any("err", err))
		return
	}
	if len(legs) > 0 {
		r.res["legsPinned"] = len(legs)
		r.log.InfoContext(ctx, "swaps: conversion legs pinned for pending charges", slog.Any("legs", legs))
	}
}

// ---- the main pass ----

type candidate struct{ id, account int64 }

// chargeDue is the run's one pass over open positions, in id order, batch by batch. A
// position is a candidate while its watermark is behind the last due date; under its lock the
// batch settles every due date it held and had not settled, all in one transaction, so its
// watermark moves to the last due date only together with every charge before it. A position
// that commits after the pass has gone by its id is left whole to the next run, never half
// charged: one pass per date would see it first on a later date and move its watermark past the
// dates before.
func (r *run) chargeDue(ctx context.Context, due []fx.Rollover) error {
	last := due[len(due)-1]
	var after int64
	for {
		rows, err := r.cfg.DB.QueryContext(ctx, "SELECT p.`id`, p.`accountId` FROM `fx_position` p FORCE INDEX (`idx_fx_position_open`) "+
			"WHERE p.`status` = 'OPEN' AND p.`id` > ? AND p.`openedAt` < ? AND (p.`swapThrough` IS NULL OR p.`swapThrough` < ?) "+
			"ORDER BY p.`id` LIMIT ?", after, last.At.UTC(), last.Date, r.cfg.Batch)
		if err != nil {
			return fmt.Errorf("swaps through %s: select positions: %w", last.Date, err)
		}
		var batch []candidate
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.id, &c.account); err != nil {
				rows.Close()
				return fmt.Errorf("swaps through %s: select positions: %w", last.Date, err)
			}
			batch = append(batch, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("swaps through %s: select positions: %w", last.Date, err)
		}
		if len(batch) == 0 {
			return nil
		}
		after = batch[len(batch)-1].id
		var got schedule.Result
		err = store.RetryRolledBack(func() error {
			var err error
			got, err = r.settleBatch(ctx, due, batch)
			return err
		})
		if err != nil {
			return fmt.Errorf("swaps through %s: %w", last.Date, err)
		}
		for k, v := range got {
			r.res[k] += v
		}
		r.batch++
		r.log.DebugContext(ctx, "swap batch committed", slog.String("through", last.Date), slog.Int("batch", r.batch),
			slog.Int("positions", len(batch)), slog.Int("charged", got["charged"]), slog.Int("pending", got["pending"]),
			slog.Int64("throughPosition", after))
	}
}

type lockedAccount struct {
	id       int64
	currency string
	balance  decimal.Decimal
	swapFree bool
}

type lockedPosition struct {
	id, account, order int64
	symbol             string
	side               fx.Side
	volume             decimal.Decimal
	status             string
	openedAt           time.Time
	through            sql.NullTime
}

type charge struct {
	position    lockedPosition
	date        string
	days        int
	amountQuote decimal.Decimal
	quoteCcy    string
	amount      decimal.Decimal
}

// settleBatch is one transaction: lock the batch's accounts then positions, re-check, and settle
// for each position every due date it held (open before the rollover instant) and has not
// settled (after its watermark): charged, parked as pending, or nothing (swap-free, zero). The
// watermarks of the positions settled move to the last due date.
func (r *run) settleBatch(ctx context.Context, due []fx.Rollover, batch []candidate) (schedule.Result, error) {
	res := schedule.Result{}
	last := due[len(due)-1]
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()

	accountIDs := make([]int64, 0, len(batch))
	positionIDs := make([]int64, 0, len(batch))
	for _, c := range batch {
		accountIDs = append(accountIDs, c.account)
		positionIDs = append(positionIDs, c.id)
	}
	accounts, err := lockAccounts(ctx, tx, accountIDs)
	if err != nil {
		return nil, err
	}
	positions, err := lockPositions(ctx, tx, positionIDs)
	if err != nil {
		return nil, err
	}

	var settled []int64 // watermark moves to last.Date
	var charges, pending []charge
	for _, p := range positions {
		held := heldSince(due, p)
		if p.status != fx.PositionOpen || len(held) == 0 {
			res["skipped"]++
			continue
		}
		a := accounts[p.account]
		if a == nil {
			return nil, fmt.Errorf("position %d: account %d not found", p.id, p.account)
		}
		if a.swapFree {
			settled = append(settled, p.id)
			res["swapFree"] += len(held)
			continue
		}
		in, ok := r.conv.Instrument(p.symbol)
		if !ok {
			r.log.ErrorContext(ctx, "swaps: position on an unknown instrument left uncharged", slog.Int64("position", p.id), slog.String("symbol", p.symbol))
			res["unknownInstrument"]++
			continue
		}
		settled = append(settled, p.id)
		points := in.SwapLong
		if p.side == fx.Sell {
			points = in.SwapShort
		}
		for _, ro := range held {
			days := DayMultiplier(ro.Weekday(), in.TripleSwapDay)
			amountQuote := p.volume.Mul(in.ContractSize).Mul(points).Mul(in.Point).Mul(decimal.NewFromInt(int64(days)))
			if amountQuote.IsZero() {
				res["zero"]++
				continue
			}
			ch := charge{position: p, date: ro.Date, days: days, amountQuote: amountQuote, quoteCcy: in.Quote}
			amount, missing, ok := r.conv.Convert(amountQuote, in.Quote, a.currency)
			if !ok {
				for _, s := range missing {
					r.legs[s] = true
				}
				pending = append(pending, ch)
				res["pending"]++
				continue
			}
			if amount.IsZero() {
				res["zero"]++
				continue
			}
			ch.amount = amount
			charges = append(charges, ch)
			res["charged"]++
		}
	}

	if err := postCharges(ctx, tx, accounts, charges); err != nil {
		return nil, err
	}
	if err := parkPending(ctx, tx, accounts, pending, r.missingFor); err != nil {
		return nil, err
	}
	if len(settled) > 0 {
		if err := moveWatermarks(ctx, tx, last.Date, settled, charges); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// heldSince is the due rollovers p is owed and has not settled, oldest first: those after its
// watermark whose instant it was open at. Read under p's lock.
func heldSince(due []fx.Rollover, p lockedPosition) []fx.Rollover {
	var out []fx.Rollover
	for _, ro := range due {
		if !p.openedAt.Before(ro.At) || (p.through.Valid && p.through.Time.Format("2006-01-02") >= ro.Date) {
			continue
		}
		out = append(out, ro)
	}
	return out
}

// missingFor names the legs a pending charge waits for, as recorded on its row.
func (r *run) missingFor(quoteCcy, accountCcy string) string {
	_, missing, _ := r.conv.Convert(decimal.NewFromInt(1), quoteCcy, accountCcy)
	return strings.Join(missing, ",")
}

// lockAccounts locks ids' account rows in id order (the order every writer uses).
func lockAccounts(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]*lockedAccount, error) {
	ids = uniqueSorted(ids)
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `currency`, `balance`, `swapFree` FROM `fx_account` WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", int64Args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]*lockedAccount, len(ids))
	for rows.Next() {
		a := &lockedAccount{}
		if err := rows.Scan(&a.id, &a.currency, &a.balance, &a.swapFree); err != nil {
			return nil, fmt.Errorf("lock accounts: %w", err)
		}
		out[a.id] = a
	}
	return out, rows.Err()
}

// lockPositions locks ids' position rows in id order, after their accounts.
func lockPositions(ctx context.Context, tx *sql.Tx, ids []int64) ([]lockedPosition, error) {
	ids = uniqueSorted(ids)
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `status`, `openedAt`, `swapThrough` "+
		"FROM `fx_position` WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", int64Args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("lock positions: %w", err)
	}
	defer rows.Close()
	out := make([]lockedPosition, 0, len(ids))
	for rows.Next() {
		var p lockedPosition
		if err := rows.Scan(&p.id, &p.account, &p.order, &p.symbol, &p.side, &p.volume, &p.status, &p.openedAt, &p.through); err != nil {
			return nil, fmt.Errorf("lock positions: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// postCharges posts one SWAP deal per charge through the ledger (balanceAfter in order within
// each account; balances and stored equity move by the same amounts: a swap is realised, not
// floating), in the caller's transaction — two multi-row statements however many charges.
func postCharges(ctx context.Context, tx *sql.Tx, accounts map[int64]*lockedAccount, charges []charge) error {
	if len(charges) == 0 {
		return nil
	}
	posted := make([]*ledger.Account, 0, len(accounts))
	for _, a := range accounts {
		posted = append(posted, &ledger.Account{ID: a.id, Currency: a.currency, Balance: a.balance, EquityMoves: true})
	}
	deals := make([]ledger.Deal, 0, len(charges))
	for _, c := range charges {
		order, position, symbol, side, volume := c.position.order, c.position.id, c.position.symbol, c.position.side, c.position.volume
		deals = append(deals, ledger.Deal{AccountID: c.position.account, Type: fx.DealSwap, Amount: c.amount, OrderID: &order,
			PositionID: &position, Symbol: &symbol, Side: &side, Volume: &volume, IdempotencyKey: DealKey(c.position.id, c.date),
			Comment: swapComment(c)})
	}
	p, err := ledger.Post(posted, deals)
	if err != nil {
		return fmt.Errorf("post %d swap deals: %w", len(charges), err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		return fmt.Errorf("post %d swap deals: %w", len(charges), err)
	}
	for _, la := range posted {
		accounts[la.ID].balance = la.Balance
	}
	return nil
}

// moveWatermarks sets swapThrough = date on every settled position and adds its charges (one
// per date it was charged) to its accrued swap.
func moveWatermarks(ctx context.Context, tx *sql.Tx, date string, settled []int64, charges []charge) error {
	args := []any{date}
	q := "UPDATE `fx_position` SET `swapThrough` = ?"
	if len(charges) > 0 {
		// CASE takes the first WHEN that matches, so a position's charges are added up first.
		sums := map[int64]decimal.Decimal{}
		var ids []int64
		for _, c := range charges {
			if _, ok := sums[c.position.id]; !ok {
				ids = append(ids, c.position.id)
			}
			sums[c.position.id] = sums[c.position.id].Add(c.amount)
		}
		var cs strings.Builder
		cs.WriteString(", `swap` = `swap` + CASE `id`")
		for _, id := range ids {
			cs.WriteString(" WHEN ? THEN ?")
			args = append(args, id, sums[id])
		}
		cs.WriteString(" ELSE 0 END")
		q += cs.String()
	}
	q += " WHERE `id` IN (" + store.Placeholders(len(settled)) + ")"
	args = append(args, int64Args(settled)...)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("move swap watermarks to %s: %w", date, err)
	}
	return nil
}

// parkPending records charges that could not be converted, amount fixed in the quote currency.
func parkPending(ctx context.Context, tx *sql.Tx, accounts map[int64]*lockedAccount, pending []charge, missingFor func(q, a string) string) error {
	if len(pending) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO `fx_swap_charge` (`positionId`, `rolloverDate`, `accountId`, `symbol`, `side`, `volume`, `days`, " +
		"`amountQuote`, `quoteCurrency`, `accountCurrency`, `missingLegs`) VALUES ")
	args := make([]any, 0, 11*len(pending))
	legs := map[string]string{}
	for i, c := range pending {
		a := accounts[c.position.account]
		k := c.quoteCcy + a.currency
		if _, ok := legs[k]; !ok {
			legs[k] = missingFor(c.quoteCcy, a.currency)
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, c.position.id, c.date, a.id, c.position.symbol, c.position.side, c.position.volume, c.days,
			c.amountQuote, c.quoteCcy, a.currency, legs[k])
	}
	// A row for this position and date cannot exist while its watermark is behind the date; the
	// clause only keeps a hand-made row from failing the batch.
	sb.WriteString(" ON DUPLICATE KEY UPDATE `attempts` = `attempts`")
	if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
		return fmt.Errorf("park %d pending swap charges: %w", len(pending), err)
	}
	return nil
}

// DealKey is the idempotency key of position's SWAP deal for a rollover date.
func DealKey(position int64, date string) string {
	return "swap:" + strconv.FormatInt(position, 10) + ":" + date
}

func swapComment(c charge) string {
	if c.days == 1 {
		return "swap " + c.date
	}
	return "swap " + c.date + " x" + strconv.Itoa(c.days)
}

// ---- pending charges ----

type pendingRow struct {
	charge
	accountCcy string
}

// retryPending converts what it can of the pending charges and charges it; the rest wait, with
// their legs pinned.
func (r *run) retryPending(ctx context.Context) error {
	rows, err := r.cfg.DB.QueryContext(ctx, "SELECT `positionId`, `rolloverDate`, `accountId`, `symbol`, `side`, `volume`, `days`, "+
		"`amountQuote`, `quoteCurrency`, `accountCurrency` FROM `fx_swap_charge` WHERE `status` = 'PENDING' ORDER BY `positionId`, `rolloverDate`")
	if err != nil {
		return fmt.Errorf("swaps: read pending charges: %w", err)
	}
	var ready, waiting []pendingRow
	for rows.Next() {
		var p pendingRow
		var date time.Time
		if err := rows.Scan(&p.position.id, &date, &p.position.account, &p.position.symbol, &p.position.side, &p.position.volume,
			&p.days, &p.amountQuote, &p.quoteCcy, &p.accountCcy); err != nil {
			rows.Close()
			return fmt.Errorf("swaps: read pending charges: %w", err)
		}
		p.date = date.Format("2006-01-02")
		amount, missing, ok := r.conv.Convert(p.amountQuote, p.quoteCcy, p.accountCcy)
		if !ok {
			for _, s := range missing {
				r.legs[s] = true
			}
			waiting = append(waiting, p)
			continue
		}
		p.amount = amount
		ready = append(ready, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("swaps: read pending charges: %w", err)
	}
	for len(ready) > 0 {
		n := min(len(ready), r.cfg.Batch)
		var got int
		err := store.RetryRolledBack(func() error {
			var err error
			got, err = r.settlePending(ctx, ready[:n])
			return err
		})
		if err != nil {
			return fmt.Errorf("swaps: charge pending: %w", err)
		}
		r.res["retried"] += got
		ready = ready[n:]
	}
	for len(waiting) > 0 {
		n := min(len(waiting), r.cfg.Batch)
		var cond strings.Builder
		args := []any{}
		for i, p := range waiting[:n] {
			if i > 0 {
				cond.WriteString(", ")
			}
			cond.WriteString("(?, ?)")
			args = append(args, p.position.id, p.date)
		}
		if _, err := r.cfg.DB.ExecContext(ctx, "UPDATE `fx_swap_charge` SET `attempts` = `attempts` + 1, `lastTriedAt` = NOW(3) "+
			"WHERE `status` = 'PENDING' AND (`positionId`, `rolloverDate`) IN ("+cond.String()+")", args...); err != nil {
			return fmt.Errorf("swaps: note pending retries: %w", err)
		}
		r.res["stillPending"] += n
		waiting = waiting[n:]
	}
	return nil
}

// settlePending charges converted pending rows in one transaction: accounts, then positions,
// then the pending rows themselves are locked, and only rows still PENDING are charged. A
// position closed since its rollover is still charged: the amount was fixed while it was open.
func (r *run) settlePending(ctx context.Context, batch []pendingRow) (int, error) {
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	var accountIDs, positionIDs []int64
	for _, p := range batch {
		accountIDs = append(accountIDs, p.position.account)
		positionIDs = append(positionIDs, p.position.id)
	}
	accounts, err := lockAccounts(ctx, tx, accountIDs)
	if err != nil {
		return 0, err
	}
	positions, err := lockPositions(ctx, tx, positionIDs)
	if err != nil {
		return 0, err
	}
	byID := make(map[int64]lockedPosition, len(positions))
	for _, p := range positions {
		byID[p.id] = p
	}
	var cond strings.Builder
	args := []any{}
	for i, p := range batch {
		if i > 0 {
			cond.WriteString(", ")
		}
		cond.WriteString("(?, ?)")
		args = append(args, p.position.id, p.date)
	}
	rows, err := tx.QueryContext(ctx, "SELECT `positionId`, `rolloverDate` FROM `fx_swap_charge` WHERE `status` = 'PENDING' "+
		"AND (`positionId`, `rolloverDate`) IN ("+cond.String()+") FOR UPDATE", args...)
	if err != nil {
		return 0, fmt.Errorf("lock pending charges: %w", err)
	}
	still := map[string]bool{}
	for rows.Next() {
		var id int64
		var d time.Time
		if err := rows.Scan(&id, &d); err != nil {
			rows.Close()
			return 0, fmt.Errorf("lock pending charges: %w", err)
		}
		still[DealKey(id, d.Format("2006-01-02"))] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("lock pending charges: %w", err)
	}

	var charges []charge
	var done strings.Builder
	doneArgs := []any{}
	var caseAmount strings.Builder
	caseArgs := []any{}
	for _, p := range batch {
		if !still[DealKey(p.position.id, p.date)] {
			continue
		}
		lp, ok := byID[p.position.id]
		if !ok {
			return 0, fmt.Errorf("pending charge of position %d: position not found", p.position.id)
		}
		c := p.charge
		c.position.order, c.position.status = lp.order, lp.status
		charges = append(charges, c)
		if len(doneArgs) > 0 {
			done.WriteString(", ")
		}
		done.WriteString("(?, ?)")
		doneArgs = append(doneArgs, p.position.id, p.date)
		caseAmount.WriteString(" WHEN `positionId` = ? AND `rolloverDate` = ? THEN ?")
		caseArgs = append(caseArgs, p.position.id, p.date, p.amount)
	}
	if len(charges) == 0 {
		return 0, nil
	}
	if err := postCharges(ctx, tx, accounts, charges); err != nil {
		return 0, err
	}
	var cs strings.Builder
	swapArgs := []any{}
	cs.WriteString("UPDATE `fx_position` SET `swap` = `swap` + CASE `id`")
	ids := make([]int64, 0, len(charges))
	for _, c := range charges {
		cs.WriteString(" WHEN ? THEN ?")
		swapArgs = append(swapArgs, c.position.id, c.amount)
		ids = append(ids, c.position.id)
	}
	// One position may have several pending dates in a batch: CASE takes the first WHEN only, so
	// positions with more than one are added up per position first.
	if hasDuplicates(ids) {
		sums := map[int64]decimal.Decimal{}
		for _, c := range charges {
			sums[c.position.id] = sums[c.position.id].Add(c.amount)
		}
		cs.Reset()
		swapArgs = swapArgs[:0]
		cs.WriteString("UPDATE `fx_position` SET `swap` = `swap` + CASE `id`")
		for _, id := range uniqueSorted(ids) {
			cs.WriteString(" WHEN ? THEN ?")
			swapArgs = append(swapArgs, id, sums[id])
		}
	}
	uids := uniqueSorted(ids)
	cs.WriteString(" ELSE 0 END WHERE `id` IN (" + store.Placeholders(len(uids)) + ")")
	swapArgs = append(swapArgs, int64Args(uids)...)
	if _, err := tx.ExecContext(ctx, cs.String(), swapArgs...); err != nil {
		return 0, fmt.Errorf("add pending charges to accrued swap: %w", err)
	}
	q := "UPDATE `fx_swap_charge` SET `status` = 'CHARGED', `settledAt` = NOW(3), `lastTriedAt` = NOW(3), `attempts` = `attempts` + 1, " +
		"`amount` = CASE" + caseAmount.String() + " END WHERE (`positionId`, `rolloverDate`) IN (" + done.String() + ")"
	if _, err := tx.ExecContext(ctx, q, append(caseArgs, doneArgs...)...); err != nil {
		return 0, fmt.Errorf("mark pending charges charged: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return len(charges), nil
}

// expire gives up on pending charges whose rollover is ExpireAfter old, and says so.
func (r *run) expire(ctx context.Context) error {
	through, err := expiredThrough(r.at, r.cfg.ExpireAfter)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT `positionId`, `rolloverDate`, `accountId`, `symbol`, `amountQuote`, `quoteCurrency`, "+
		"`accountCurrency`, `missingLegs`, `attempts` FROM `fx_swap_charge` WHERE `status` = 'PENDING' AND `rolloverDate` <= ? "+
		"ORDER BY `rolloverDate`, `positionId` FOR UPDATE", through)
	if err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	type expired struct {
		PositionID    int64  `json:"positionId"`
		Date          string `json:"date"`
		AccountID     int64  `json:"accountId"`
		Symbol        string `json:"symbol"`
		AmountQuote   string `json:"amountQuote"`
		QuoteCurrency string `json:"quoteCurrency"`
		Currency      string `json:"accountCurrency"`
		MissingLegs   string `json:"missingLegs"`
		Attempts      int    `json:"attempts"`
	}
	var all []expired
	for rows.Next() {
		var e expired
		var d time.Time
		var amt decimal.Decimal
		if err := rows.Scan(&e.PositionID, &d, &e.AccountID, &e.Symbol, &amt, &e.QuoteCurrency, &e.Currency, &e.MissingLegs, &e.Attempts); err != nil {
			rows.Close()
			return fmt.Errorf("swaps: expire: %w", err)
		}
		e.Date, e.AmountQuote = d.Format("2006-01-02"), amt.String()
		all = append(all, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	if len(all) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_swap_charge` SET `status` = 'EXPIRED', `settledAt` = NOW(3) "+
		"WHERE `status` = 'PENDING' AND `rolloverDate` <= ?", through); err != nil {
		return fmt.Errorf("swaps: expire: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("swaps: expire: commit: %w", err)
	}
	r.res["expired"] = len(all)

	const named = 50
	parts := make([]string, 0, min(len(all), named))
	for _, e := range all[:min(len(all), named)] {
		legs := e.MissingLegs
		if legs == "" {
			legs = "no hub pair"
		}
		parts = append(parts, fmt.Sprintf("position %d on %s (%s, account %d, %s %s, missing %s)",
			e.PositionID, e.Date, e.Symbol, e.AccountID, e.AmountQuote, e.QuoteCurrency, legs))
	}
	list := strings.Join(parts, "; ")
	if len(all) > named {
		list += fmt.Sprintf("; and %d more", len(all)-named)
	}
	msg := fmt.Sprintf("%d rollover charge(s) expired uncharged after %s because no conversion to the account currency was available: %s. "+
		"The quote mirror (or the tick engine) never supplied the legs; the charges are kept as EXPIRED in fx_swap_charge.",
		len(all), r.cfg.ExpireAfter, list)
	r.log.ErrorContext(ctx, "swap charges expired uncharged", slog.Int("count", len(all)), slog.String("charges", list))
	if r.cfg.Alerts != nil {
		if err := r.cfg.Alerts.Raise(ctx, AlertExpired, alert.Critical, msg, map[string]any{"charges": all}); err != nil {
			r.log.WarnContext(ctx, "swaps: cannot raise alert", slog.String("code", AlertExpired), slog.Any("err", err))
		}
	}
	return nil
}

// ---- helpers ----

func int64Args(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

func uniqueSorted(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func hasDuplicates(ids []int64) bool { return len(uniqueSorted(ids)) != len(ids) }
