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

	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
)

type candidate struct{ id, account int64 }

// candidatesSQL selects the next batch of positions whose watermark is behind the last due date,
// after an (account, position) pair, in account then id order: a consistent read, no lock (the
// batch locks and re-checks). Account order keeps each batch's writes — deals, events, balances
// — on neighbouring pages of their (accountId, …) indexes (migration 000036).
const candidatesSQL = "SELECT p.`id`, p.`accountId` FROM `fx_position` p FORCE INDEX (`idx_fx_position_open_account`) " +
	"WHERE p.`status` = 'OPEN' AND (p.`accountId` > ? OR (p.`accountId` = ? AND p.`id` > ?)) AND p.`openedAt` < ? " +
	"AND (p.`swapThrough` IS NULL OR p.`swapThrough` < ?) ORDER BY p.`accountId`, p.`id` LIMIT ?"

func scanCandidates(out *[]candidate) func(*sql.Rows) error {
	return func(rows *sql.Rows) error {
		*out = (*out)[:0]
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.id, &c.account); err != nil {
				return err
			}
			*out = append(*out, c)
		}
		return nil
	}
}

// chargeDue is the run's one pass over open positions, account by account, batch by batch. A
// position is a candidate while its watermark is behind the last due date; under its lock the
// batch settles every due date it held and had not settled, all in one transaction, so its
// watermark moves to the last due date only together with every charge before it. A position
// that commits after the pass has gone by its account is left whole to the next run, never half
// charged: one pass per date would see it first on a later date and move its watermark past the
// dates before.
//
// A batch is two round trips (settleBatch); the first also reads the next batch's candidates,
// so the pass costs no round trip of its own after its first read.
func (r *run) chargeDue(ctx context.Context, due []fx.Rollover) error {
	last := due[len(due)-1]
	var batch []candidate
	rows, err := r.cfg.DB.QueryContext(ctx, candidatesSQL, 0, 0, 0, last.At.UTC(), last.Date, r.cfg.Batch)
	if err == nil {
		err = scanCandidates(&batch)(rows)
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return fmt.Errorf("swaps through %s: select positions: %w", last.Date, err)
	}
	for len(batch) > 0 {
		var got schedule.Result
		var next []candidate
		err := store.RetryRolledBack(ctx, func() error {
			var err error
			got, next, err = r.settleBatch(ctx, due, batch)
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
			slog.Int64("throughPosition", batch[len(batch)-1].id))
		batch = next
	}
	return nil
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
// watermarks of the positions settled move to the last due date. It returns the next batch's
// candidates, read in the same round trip as the locks.
//
// Two round trips (book.Txn): START TRANSACTION, the locks and the next candidates; then every
// write — the ledger's, the pending rows, the watermarks, the swap.charged events (last, as
// events.Add places them) — and COMMIT. A failure anywhere rolls the whole batch back, so a
// watermark never moves without its charges and an event is never told without its deal.
func (r *run) settleBatch(ctx context.Context, due []fx.Rollover, batch []candidate) (schedule.Result, []candidate, error) {
	res := schedule.Result{}
	last := due[len(due)-1]

	accountIDs := make([]int64, 0, len(batch))
	positionIDs := make([]int64, 0, len(batch))
	for _, c := range batch {
		accountIDs = append(accountIDs, c.account)
		positionIDs = append(positionIDs, c.id)
	}
	var accounts map[int64]*lockedAccount
	var positions []lockedPosition
	var next []candidate
	lock := &book.Batch{}
	tx, err := book.BeginTxn(ctx, r.cfg.DB, lock)
	if err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	lockAccounts(lock, accountIDs, &accounts)
	lockPositions(lock, positionIDs, &positions)
	end := batch[len(batch)-1]
	lock.Query(scanCandidates(&next), candidatesSQL, end.account, end.account, end.id, last.At.UTC(), last.Date, r.cfg.Batch)
	if err := tx.Lock(ctx, lock, "lock accounts and positions"); err != nil {
		return nil, nil, err
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
			return nil, nil, fmt.Errorf("position %d: account %d not found", p.id, p.account)
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

	write := &book.Batch{}
	if err := postCharges(write, accounts, charges); err != nil {
		return nil, nil, err
	}
	parkPending(write, accounts, pending, r.missingFor)
	accrue(write, last.Date, settled, charges)
	if err := tx.Commit(ctx, write); err != nil {
		return nil, nil, fmt.Errorf("write and commit %d charges: %w", len(charges), err)
	}
	return res, next, nil
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

const lockAccountsSQL = "SELECT `id`, `userId`, `currency`, `balance`, `swapFree`, `accountGroup` FROM `fx_account` WHERE `id` IN ("

// lockAccounts adds to b the lock of ids' account rows in id order (the order every writer
// uses); *out holds them once b has run.
func lockAccounts(b *book.Batch, ids []int64, out *map[int64]*lockedAccount) {
	ids = uniqueSorted(ids)
	b.Query(func(rows *sql.Rows) error {
		m := make(map[int64]*lockedAccount, len(ids))
		for rows.Next() {
			a := &lockedAccount{}
			if err := rows.Scan(&a.id, &a.user, &a.currency, &a.balance, &a.swapFree, &a.group); err != nil {
				return fmt.Errorf("lock accounts: %w", err)
			}
			m[a.id] = a
		}
		*out = m
		return nil
	}, lockAccountsSQL+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
}

const lockPositionsSQL = "SELECT `id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `status`, `openedAt`, `swapThrough` FROM `fx_position` WHERE `id` IN ("

// lockPositions adds to b the lock of ids' position rows in id order, after their accounts;
// *out holds them once b has run.
func lockPositions(b *book.Batch, ids []int64, out *[]lockedPosition) {
	ids = uniqueSorted(ids)
	b.Query(func(rows *sql.Rows) error {
		ps := make([]lockedPosition, 0, len(ids))
		for rows.Next() {
			var p lockedPosition
			if err := rows.Scan(&p.id, &p.account, &p.order, &p.symbol, &p.side, &p.volume, &p.status, &p.openedAt, &p.through); err != nil {
				return fmt.Errorf("lock positions: %w", err)
			}
			ps = append(ps, p)
		}
		*out = ps
		return nil
	}, lockPositionsSQL+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
}

// postCharges adds to b one SWAP deal per charge through the ledger (balanceAfter in order within
// each account; balances and stored equity move by the same amounts: a swap is realised, not
// floating), and one swap.charged per deal, which events.Add places among b's last statements,
// just before COMMIT — so a batch rolled back and run again tells them again only with its
// charges.
func postCharges(b *book.Batch, accounts map[int64]*lockedAccount, charges []charge) error {
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
	for _, s := range p.Stmts {
		b.Exec(s.SQL, s.Args...)
	}
	for _, la := range posted {
		accounts[la.ID].balance = la.Balance
	}
	// Post keeps the deals in the order given: p.Deals[i] is charges[i]'s.
	for i, d := range p.Deals {
		c := charges[i]
		if err := events.Add(b, events.Event{AccountID: d.AccountID, UserID: accounts[d.AccountID].user, Type: events.SwapCharged,
			Payload: events.Swap{Balance: events.BalanceOf(d), RolloverDate: c.date, Days: c.days}}); err != nil {
			return fmt.Errorf("tell swap charge %s: %w", d.IdempotencyKey, err)
		}
	}
	return nil
}

// accrue adds to b the move of every settled position's watermark to date (none when date is
// "") and of its charges (one per date it was charged) into its accrued swap. One UPDATE per
// maxCase positions: the server tries a CASE's WHENs in turn for every row it updates, so one
// UPDATE over a whole batch would cost the batch's size squared.
func accrue(b *book.Batch, date string, settled []int64, charges []charge) {
	sums := map[int64]decimal.Decimal{}
	if date == "" {
		settled = nil
		for _, c := range charges {
			if _, seen := sums[c.position.id]; !seen {
				settled = append(settled, c.position.id)
			}
			sums[c.position.id] = sums[c.position.id].Add(c.amount)
		}
	} else {
		for _, c := range charges {
			sums[c.position.id] = sums[c.position.id].Add(c.amount)
		}
	}
	for len(settled) > 0 {
		n := min(len(settled), maxCase)
		chunk := settled[:n]
		settled = settled[n:]
		var q strings.Builder
		var args []any
		q.WriteString("UPDATE `fx_position` SET ")
		if date != "" {
			q.WriteString("`swapThrough` = ?")
			args = append(args, date)
		}
		var whens int
		for _, id := range chunk {
			sum, ok := sums[id]
			if !ok {
				continue
			}
			if whens == 0 {
				if date != "" {
					q.WriteString(", ")
				}
				q.WriteString("`swap` = `swap` + CASE `id`")
			}
			whens++
			q.WriteString(" WHEN ? THEN ?")
			args = append(args, id, sum)
		}
		if whens > 0 {
			q.WriteString(" ELSE 0 END")
		}
		q.WriteString(" WHERE `id` IN (" + store.Placeholders(len(chunk)) + ")")
		b.Exec(q.String(), append(args, store.Int64Args(chunk)...)...)
	}
}

// maxCase is how many rows one CASE UPDATE names (see accrue).
const maxCase = 50

// parkPending records charges that could not be converted, amount fixed in the quote currency.
func parkPending(b *book.Batch, accounts map[int64]*lockedAccount, pending []charge, missingFor func(q, a string) string) {
	if len(pending) == 0 {
		return
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
	b.Exec(sb.String(), args...)
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
