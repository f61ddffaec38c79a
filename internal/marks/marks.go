// Package marks owns reconcileFxAccounts (docs/architecture.md, «Scheduled jobs»), the job that
// keeps the accounts' stored marks current: every five minutes it refreshes each account's stored
// equity and used margin from the process's mids (the quote mirror in fxdesk-cron, the tick engine
// inline) through the trading package's own metrics. The same pass over the accounts expires GTD
// and DAY orders whose time has passed, and checks the ledger invariant Σ deals = balance per
// account, raising `ledger-drift` naming each drifting account and the difference, and resolving
// it once every account matches again. Each expiry is told (order.expired) in its own
// transaction. (The venue's book is reconciled elsewhere, by
// execution.Reconciler; the job's name is older than this package's.)
//
// It never moves a balance: a drift is reported, not repaired — only a person knows which side
// is wrong.
package marks

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/schedule"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// AlertDrift is raised while some account's balance differs from the sum of its deals.
const AlertDrift = "ledger-drift"

// AlertInbox receives ledger-drift; *alert.Inbox satisfies it.
type AlertInbox interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// Config shapes a Job. DB is required.
type Config struct {
	DB     *sql.DB
	Prices func() tick.Prices // the price view at the start of a run
	Alerts AlertInbox         // nil: drift is only logged
	Batch  int                // accounts marked per transaction; default 200
	// LedgerBatch is how many accounts one statement of the ledger check reads; default 1000.
	LedgerBatch int
}

// Job is reconcileFxAccounts.
type Job struct {
	cfg Config
	log *slog.Logger
}

// New returns the job.
func New(cfg Config, log *slog.Logger) *Job {
	if cfg.Batch <= 0 {
		cfg.Batch = 200
	}
	if cfg.LedgerBatch <= 0 {
		cfg.LedgerBatch = 1000
	}
	return &Job{cfg: cfg, log: log}
}

// Run reconciles as of at (orders whose expiry is at or before at expire). Counts: marked,
// unpriced (accounts whose marks were left alone for want of a mid), expiredOrders, drifted.
func (j *Job) Run(ctx context.Context, at time.Time) (schedule.Result, error) {
	res := schedule.Result{}
	n, err := j.expireOrders(ctx, at)
	if err != nil {
		return res, err
	}
	res["expiredOrders"] = n
	if err := j.mark(ctx, res); err != nil {
		return res, err
	}
	if err := j.checkLedger(ctx, res); err != nil {
		return res, err
	}
	return res, nil
}

// expireOrders expires resting GTD and DAY orders whose time has passed. A DAY order's expiry is
// the 17:00 New York rollover after it was placed, stored when it was placed. Each batch of
// orders is one transaction that locks them, expires those still PENDING — so an order the risk
// engine fills at the same moment stays filled — and writes one order.expired per order it
// expired, with the change (docs/architecture.md, «Events»). The job holds no lease: its events
// carry term 0.
func (j *Job) expireOrders(ctx context.Context, at time.Time) (int, error) {
	ids, err := store.QueryAll(ctx, j.cfg.DB, "expire orders", store.ScanInt64,
		"SELECT `id` FROM `fx_order` WHERE `status` = 'PENDING' AND `timeInForce` IN ('GTD', 'DAY') AND `expiresAt` IS NOT NULL "+
			"AND `expiresAt` <= ? ORDER BY `id`", at.UTC())
	if err != nil {
		return 0, err
	}
	total := 0
	for len(ids) > 0 {
		n := min(len(ids), j.cfg.Batch)
		var got int
		if err := store.RetryRolledBack(ctx, func() (err error) {
			got, err = j.expireBatch(ctx, ids[:n], at)
			return err
		}); err != nil {
			return total, err
		}
		total += got
		ids = ids[n:]
	}
	return total, nil
}

// expireBatch is one transaction of expireOrders over orders ids.
func (j *Job) expireBatch(ctx context.Context, ids []int64, at time.Time) (int, error) {
	tx, err := j.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("expire orders: begin: %w", err)
	}
	defer tx.Rollback()
	orders, err := store.QueryAll(ctx, tx, "expire orders: lock", book.ScanOrder, "SELECT "+book.OrderCols+" FROM `fx_order` o WHERE o.`id` IN ("+
		store.Placeholders(len(ids))+") AND o.`status` = 'PENDING' AND o.`expiresAt` <= ? ORDER BY o.`id` FOR UPDATE", append(store.Int64Args(ids), at.UTC())...)
	if err != nil || len(orders) == 0 {
		return 0, err
	}
	expired := make([]int64, len(orders))
	for i, o := range orders {
		expired[i] = o.ID
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_order` SET `status` = 'EXPIRED' WHERE `id` IN ("+store.Placeholders(len(expired))+") AND `status` = 'PENDING'",
		store.Int64Args(expired)...); err != nil {
		return 0, fmt.Errorf("expire orders: %w", err)
	}
	owners := map[int64]int64{}
	for _, o := range orders {
		if _, ok := owners[o.AccountID]; ok {
			continue
		}
		var user int64
		if err := tx.QueryRowContext(ctx, "SELECT `userId` FROM `fx_account` WHERE `id` = ?", o.AccountID).Scan(&user); err != nil {
			return 0, fmt.Errorf("expire orders: owner of account %d: %w", o.AccountID, err)
		}
		owners[o.AccountID] = user
	}
	// The events are the transaction's last statements (events.Record).
	told := make([]events.Event, len(orders))
	for i, o := range orders {
		o.Status = fx.OrderExpired
		told[i] = events.Event{AccountID: o.AccountID, UserID: owners[o.AccountID], Type: events.OrderExpired, Payload: events.OrderOf(o)}
	}
	if err := events.Record(ctx, tx, told...); err != nil {
		return 0, fmt.Errorf("expire orders: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("expire orders: commit: %w", err)
	}
	return len(orders), nil
}

// mark refreshes stored equity and used margin, a batch of accounts per transaction: the
// accounts are locked (as fills lock them) so a mark never overwrites a fresher one written by a
// fill with an older balance.
func (j *Job) mark(ctx context.Context, res schedule.Result) error {
	var prices tick.Prices
	if j.cfg.Prices != nil {
		prices = j.cfg.Prices()
	}
	conv, err := book.NewConverter(ctx, j.cfg.DB, prices)
	if err != nil {
		return err
	}
	var after int64
	for {
		rows, err := j.cfg.DB.QueryContext(ctx, "SELECT `id` FROM `fx_account` WHERE `id` > ? ORDER BY `id` LIMIT ?", after, j.cfg.Batch)
		if err != nil {
			return fmt.Errorf("mark accounts: %w", err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return fmt.Errorf("mark accounts: %w", err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("mark accounts: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		after = ids[len(ids)-1]
		if err := j.markBatch(ctx, conv, ids, res); err != nil {
			return err
		}
	}
}

func (j *Job) markBatch(ctx context.Context, conv *book.Converter, ids []int64, res schedule.Result) error {
	tx, err := j.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("mark accounts: begin: %w", err)
	}
	defer tx.Rollback()
	in := store.Placeholders(len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := tx.QueryContext(ctx, "SELECT `id`, `accountGroup`, `currency`, `leverage`, `balance` FROM `fx_account` WHERE `id` IN ("+in+") ORDER BY `id` FOR UPDATE", args...)
	if err != nil {
		return fmt.Errorf("mark accounts: lock: %w", err)
	}
	var accounts []book.Account
	for rows.Next() {
		var a book.Account
		if err := rows.Scan(&a.ID, &a.Group, &a.Currency, &a.Leverage, &a.Balance); err != nil {
			rows.Close()
			return fmt.Errorf("mark accounts: lock: %w", err)
		}
		accounts = append(accounts, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mark accounts: lock: %w", err)
	}
	rows, err = tx.QueryContext(ctx, "SELECT `accountId`, `symbol`, `side`, SUM(`volume`), SUM(`volume` * `openPrice`) FROM `fx_position` "+
		"WHERE `accountId` IN ("+in+") AND `status` = 'OPEN' GROUP BY `accountId`, `symbol`, `side` ORDER BY `accountId`, `symbol`, `side`", args...)
	if err != nil {
		return fmt.Errorf("mark accounts: exposures: %w", err)
	}
	exps := map[int64][]book.Exposure{}
	for rows.Next() {
		var id int64
		var e book.Exposure
		var side string
		if err := rows.Scan(&id, &e.Symbol, &side, &e.Volume, &e.VolumePrice); err != nil {
			rows.Close()
			return fmt.Errorf("mark accounts: exposures: %w", err)
		}
		e.Side = fx.Side(side)
		exps[id] = append(exps[id], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mark accounts: exposures: %w", err)
	}

	var eq, um strings.Builder
	var eqArgs, umArgs, marked []any
	for _, a := range accounts {
		m, ok := conv.Marks(a, a.Balance, exps[a.ID])
		if !ok {
			res["unpriced"]++
			continue
		}
		eq.WriteString(" WHEN ? THEN ?")
		eqArgs = append(eqArgs, a.ID, m.Equity)
		um.WriteString(" WHEN ? THEN ?")
		umArgs = append(umArgs, a.ID, m.UsedMargin)
		marked = append(marked, a.ID)
	}
	if len(marked) > 0 {
		q := "UPDATE `fx_account` SET `equity` = CASE `id`" + eq.String() + " END, `usedMargin` = CASE `id`" + um.String() +
			" END, `markedAt` = NOW(3) WHERE `id` IN (" + store.Placeholders(len(marked)) + ")"
		all := append(append(eqArgs, umArgs...), marked...)
		if _, err := tx.ExecContext(ctx, q, all...); err != nil {
			return fmt.Errorf("mark accounts: write: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("mark accounts: commit: %w", err)
	}
	res["marked"] += len(marked)
	return nil
}

// checkLedgerSQL reads a batch of accounts after an id with their balance, checkpoint and last
// deal id (the newest entry of the account's (accountId, id) index), in one consistent read.
const checkLedgerSQL = "SELECT a.`id`, a.`currency`, a.`balance`, COALESCE(c.`throughDealId`, 0), COALESCE(c.`dealsSum`, 0), " +
	"COALESCE((SELECT d.`id` FROM `fx_deal` d WHERE d.`accountId` = a.`id` ORDER BY d.`id` DESC LIMIT 1), 0) " +
	"FROM `fx_account` a LEFT JOIN `fx_ledger_checkpoint` c ON c.`accountId` = a.`id` WHERE a.`id` > ? ORDER BY a.`id` LIMIT ?"

// sumNewDeals sets each row's since to the sum of its account's deals after its checkpoint, up
// to the last deal id read with it: one statement over those ranges of idx_fx_deal_account.
func (j *Job) sumNewDeals(ctx context.Context, batch []ledgerRow) error {
	var q strings.Builder
	var args []any
	idx := map[int64]int{}
	for i, r := range batch {
		if r.last <= r.through {
			continue
		}
		if len(args) > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(d.`accountId` = ? AND d.`id` > ? AND d.`id` <= ?)")
		args = append(args, r.account, r.through, r.last)
		idx[r.account] = i
	}
	if len(args) == 0 {
		return nil
	}
	rows, err := j.cfg.DB.QueryContext(ctx, "SELECT d.`accountId`, SUM(d.`amount`) FROM `fx_deal` d WHERE "+q.String()+" GROUP BY d.`accountId`", args...)
	if err != nil {
		return fmt.Errorf("check ledger: new deals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var sum decimal.Decimal
		if err := rows.Scan(&id, &sum); err != nil {
			return fmt.Errorf("check ledger: new deals: %w", err)
		}
		batch[idx[id]].since = sum
	}
	return rows.Err()
}

// ledgerRow is one account as the ledger check reads it.
type ledgerRow struct {
	account, through, last  int64
	currency                string
	balance, checked, since decimal.Decimal
}

func scanLedgerRow(sc store.Scanner) (ledgerRow, error) {
	var r ledgerRow
	err := sc.Scan(&r.account, &r.currency, &r.balance, &r.through, &r.checked, &r.last)
	return r, err
}

// drift is one account whose balance is not the sum of its deals.
type drift struct {
	AccountID  int64  `json:"accountId"`
	Currency   string `json:"currency"`
	Balance    string `json:"balance"`
	DealsSum   string `json:"dealsSum"`
	Difference string `json:"difference"` // balance − Σ deals
}

// checkLedger compares every balance with the sum of its deals, a batch of accounts at a time,
// without reading the whole ledger: an account's sum is its checkpoint (the sum of its deals
// through a deal id, fx_ledger_checkpoint, migration 000036) plus the deals after that id — the
// deals written since the last check — so a check costs the accounts and the new deals, not the
// ledger's age. A sum is always computed from deals, never taken from a balance, so a drift
// stays a drift at every check until the balance is put right.
//
// Two statements per batch. The first reads each account's balance, checkpoint and last deal id
// in one consistent read: that balance is the sum of exactly the account's deals up to that id.
// The second sums the deals between the checkpoint and that id, ranges of the (accountId, id)
// index. This is exact because an account's deals get ids in commit order (the ledger inserts
// them after its UPDATE of the account row, under that lock until COMMIT) and a deal is never
// changed once written: the deals up to the id read are all committed, and no later one can
// take an id below it. The checkpoints then move to the id read, with the sum.
func (j *Job) checkLedger(ctx context.Context, res schedule.Result) error {
	var drifts []drift
	var after int64
	for {
		batch, err := store.QueryAll(ctx, j.cfg.DB, "check ledger", scanLedgerRow, checkLedgerSQL, after, j.cfg.LedgerBatch)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			break
		}
		after = batch[len(batch)-1].account
		if err := j.sumNewDeals(ctx, batch); err != nil {
			return err
		}
		var moved strings.Builder
		var args []any
		for _, r := range batch {
			sum := r.checked.Add(r.since)
			if !r.balance.Equal(sum) {
				drifts = append(drifts, drift{AccountID: r.account, Currency: r.currency, Balance: fx.FormatMoney(r.currency, r.balance),
					DealsSum: fx.FormatMoney(r.currency, sum), Difference: fx.FormatMoney(r.currency, r.balance.Sub(sum))})
			}
			if r.last > r.through {
				if len(args) > 0 {
					moved.WriteString(", ")
				}
				moved.WriteString("(?, ?, ?)")
				args = append(args, r.account, r.last, sum)
			}
		}
		if len(args) > 0 {
			// A second checker writing an older checkpoint over a newer one costs only a re-read
			// of the deals between them: every (throughDealId, dealsSum) pair written is exact.
			if _, err := j.cfg.DB.ExecContext(ctx, "INSERT INTO `fx_ledger_checkpoint` (`accountId`, `throughDealId`, `dealsSum`) VALUES "+moved.String()+
				" ON DUPLICATE KEY UPDATE `throughDealId` = VALUES(`throughDealId`), `dealsSum` = VALUES(`dealsSum`)", args...); err != nil {
				return fmt.Errorf("check ledger: move checkpoints: %w", err)
			}
		}
	}
	res["drifted"] = len(drifts)
	if len(drifts) == 0 {
		if j.cfg.Alerts != nil {
			if err := j.cfg.Alerts.Resolve(ctx, AlertDrift); err != nil {
				j.log.WarnContext(ctx, "marks: cannot resolve alert", slog.String("code", AlertDrift), slog.Any("err", err))
			}
		}
		return nil
	}
	const named = 50
	parts := make([]string, 0, min(len(drifts), named))
	for _, d := range drifts[:min(len(drifts), named)] {
		parts = append(parts, "account "+strconv.FormatInt(d.AccountID, 10)+": balance "+d.Balance+" "+d.Currency+
			", deals sum to "+d.DealsSum+", difference "+d.Difference)
	}
	list := strings.Join(parts, "; ")
	if len(drifts) > named {
		list += fmt.Sprintf("; and %d more", len(drifts)-named)
	}
	msg := fmt.Sprintf("Ledger drift: %d account(s) whose balance is not the sum of their deals — %s. "+
		"Every balance change is written with its deal in one transaction, so a difference means the balance was changed "+
		"outside the desk. Nothing is repaired automatically.", len(drifts), list)
	j.log.ErrorContext(ctx, "ledger drift", slog.Int("accounts", len(drifts)), slog.String("drift", list))
	if j.cfg.Alerts != nil {
		if err := j.cfg.Alerts.Raise(ctx, AlertDrift, alert.Critical, msg, map[string]any{"accounts": drifts}); err != nil {
			j.log.WarnContext(ctx, "marks: cannot raise alert", slog.String("code", AlertDrift), slog.Any("err", err))
		}
	}
	return nil
}
