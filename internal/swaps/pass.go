package swaps

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
)

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
		err = store.RetryRolledBack(ctx, func() error {
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
	id, user int64 // the account and its owner
	currency string
	balance  decimal.Decimal
	swapFree bool
	group    string // its account group, whose swap points it pays
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
		// The swap points are the account group's on this symbol (catalog.Catalog.Effective).
		in, ok := r.conv.Terms(a.group, p.symbol)
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

	told, err := postCharges(ctx, tx, accounts, charges)
	if err != nil {
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
	if err := told(ctx, tx); err != nil {
		return nil, err
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
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `userId`, `currency`, `balance`, `swapFree`, `accountGroup` FROM `fx_account` WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
	if err != nil {
		return nil, fmt.Errorf("lock accounts: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]*lockedAccount, len(ids))
	for rows.Next() {
		a := &lockedAccount{}
		if err := rows.Scan(&a.id, &a.user, &a.currency, &a.balance, &a.swapFree, &a.group); err != nil {
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
		"FROM `fx_position` WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
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
// floating), in the caller's transaction — two multi-row statements however many charges. It
// returns told, which writes one swap.charged per deal posted; the caller calls it as the
// transaction's last statements, just before COMMIT (events.Record), so a batch retried after a
// rollback writes them again only with its charges.
func postCharges(ctx context.Context, tx *sql.Tx, accounts map[int64]*lockedAccount, charges []charge) (told func(context.Context, *sql.Tx) error, err error) {
	if len(charges) == 0 {
		return func(context.Context, *sql.Tx) error { return nil }, nil
	}
	posted := make([]*ledger.Account, 0, len(accounts))
	for _, a := range accounts {
		posted = append(posted, &ledger.Account{ID: a.id, Currency: a.currency, Balance: a.balance, EquityMoves: true})
	}
	deals := make([]ledger.Deal, 0, len(charges))
	byKey := make(map[string]charge, len(charges))
	for _, c := range charges {
		order, position, symbol, side, volume := c.position.order, c.position.id, c.position.symbol, c.position.side, c.position.volume
		key := DealKey(c.position.id, c.date)
		deals = append(deals, ledger.Deal{AccountID: c.position.account, Type: fx.DealSwap, Amount: c.amount, OrderID: &order,
			PositionID: &position, Symbol: &symbol, Side: &side, Volume: &volume, IdempotencyKey: key,
			Comment: swapComment(c)})
		byKey[key] = c
	}
	p, err := ledger.Post(posted, deals)
	if err != nil {
		return nil, fmt.Errorf("post %d swap deals: %w", len(charges), err)
	}
	if err := p.Exec(ctx, tx); err != nil {
		return nil, fmt.Errorf("post %d swap deals: %w", len(charges), err)
	}
	for _, la := range posted {
		accounts[la.ID].balance = la.Balance
	}
	es := make([]events.Event, 0, len(p.Deals))
	for _, d := range p.Deals {
		c := byKey[d.IdempotencyKey]
		es = append(es, events.Event{AccountID: d.AccountID, UserID: accounts[d.AccountID].user, Type: events.SwapCharged,
			Payload: events.Swap{Balance: events.BalanceOf(d), RolloverDate: c.date, Days: c.days}})
	}
	return func(ctx context.Context, tx *sql.Tx) error {
		if err := events.Record(ctx, tx, es...); err != nil {
			return fmt.Errorf("tell %d swap charges: %w", len(es), err)
		}
		return nil
	}, nil
}

// moveWatermarks sets swapThrough = date on every settled position and adds its charges (one
// per date it was charged) to its accrued swap.
func moveWatermarks(ctx context.Context, tx *sql.Tx, date string, settled []int64, charges []charge) error {
	args := []any{date}
	q := "UPDATE `fx_position` SET `swapThrough` = ?"
	if len(charges) > 0 {
		clause, _, cargs := swapAccrual(charges)
		q += ", " + clause
		args = append(args, cargs...)
	}
	q += " WHERE `id` IN (" + store.Placeholders(len(settled)) + ")"
	args = append(args, store.Int64Args(settled)...)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("move swap watermarks to %s: %w", date, err)
	}
	return nil
}

// swapAccrual is the SET clause that adds charges to their positions' accrued swap, its
// arguments, and the positions it names (in first-seen order). A position's charges are summed
// first: CASE takes only the first WHEN that matches.
func swapAccrual(charges []charge) (clause string, positions []int64, args []any) {
	sums := map[int64]decimal.Decimal{}
	for _, c := range charges {
		if _, ok := sums[c.position.id]; !ok {
			positions = append(positions, c.position.id)
		}
		sums[c.position.id] = sums[c.position.id].Add(c.amount)
	}
	var cs strings.Builder
	cs.WriteString("`swap` = `swap` + CASE `id`")
	for _, id := range positions {
		cs.WriteString(" WHEN ? THEN ?")
		args = append(args, id, sums[id])
	}
	cs.WriteString(" ELSE 0 END")
	return cs.String(), positions, args
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
