package book

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/lease"
	"fxdesk/internal/store"
)

// A batch is two round trips: the row locks and the reads its rules need, then the writes, the
// fence and COMMIT. For a batch of market fills on accounts an earlier batch left as the
// committer remembers them, the first round trip reads nothing the committer does not know: the
// rules run on the remembered rows, and the batch goes out as one round trip that locks the
// accounts, checks under those locks that every row the rules read is still as remembered
// (StaleCheck), writes, fences and commits. A check that fails rolls the batch back with nothing
// written, and the batch runs again the two-round-trip way, on the rows it locks and reads.
// The memory is only ever a guess that the check confirms: a deposit, a swap, a withdrawal, an
// account moved to another group or given another state, or a position written by another
// holder is seen by the check, never by the rules.

// Remembered is what a fill's rules read of one account, as the last batch that locked it left
// it: the row, its balanceVersion and its open exposures.
type Remembered struct {
	Account   Account
	Version   int64
	Exposures []Exposure
}

// maxRemembered bounds the memory; past it, it starts again empty.
const maxRemembered = 100_000

// memory is the committer's remembered accounts.
type memory struct {
	mu sync.Mutex
	m  map[int64]Remembered
}

func (m *memory) get(id int64) (Remembered, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[id]
	return r, ok
}

// forget drops what is remembered of the accounts ws write: a batch that failed may have left
// them in a state no batch read.
func (m *memory) forget(ws []Write) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range ws {
		delete(m.m, w.Base().Account)
	}
}

// keep remembers the accounts of a batch that committed (or had nothing to write) as the batch
// left them: the ledger bumped the balanceVersion of every account it posted to. An account
// whose exposures the batch did not read (a close's) is forgotten.
func (m *memory) keep(r *Rows) {
	posted := map[int64]bool{}
	for _, d := range r.Deals {
		posted[d.AccountID] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxRemembered {
		m.m = map[int64]Remembered{}
	}
	for id, a := range r.Accounts {
		exps, read := r.Exposures[id]
		version, locked := r.Versions[id]
		if !read || !locked {
			delete(m.m, id)
			continue
		}
		if posted[id] {
			version++
		}
		m.m[id] = Remembered{Account: *a, Version: version, Exposures: slices.Clone(exps)}
	}
}

// oneTrip commits ws in one round trip when every write is a market fill on a remembered
// B-book account. ok is false when it did not apply, or the server refused one of its statements
// other than the fence — its check finding a row changed among them (nothing was written either
// way): the caller then runs the batch on the rows it locks. Otherwise r and err are the batch's
// outcome, as attempt returns it.
func (c *Committer) oneTrip(ctx context.Context, ws []Write, cat *catalog.Catalog, fence string, fenceArgs []any) (r *Rows, ok bool, err error) {
	s := c.cfg
	known := map[int64]Remembered{}
	var nonces []NonceKey
	for _, w := range ws {
		nonce, ok := w.OneTrip()
		if !ok {
			return nil, false, nil
		}
		account := w.Base().Account
		k, found := c.known.get(account)
		if !found || k.Account.Execution != fx.Internal {
			return nil, false, nil
		}
		known[account] = k
		if nonce != "" {
			nonces = append(nonces, NonceKey{account, nonce})
		}
	}
	r = &Rows{Catalog: cat, Market: NewMarket(s.Prices, cat), Now: s.Now().UTC()}
	r.reset()
	ids := make([]int64, 0, len(known))
	for id, k := range known {
		a := k.Account
		r.Accounts[id], r.locked[id], r.Versions[id] = &a, a.Balance, k.Version
		r.Exposures[id] = slices.Clone(k.Exposures)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, w := range ws {
		w.Base().Err = w.Apply(r)
	}
	if len(r.unread) > 0 || len(r.unreadHeld) > 0 {
		// A rule asked for exposures (or held positions) the memory does not hold: the locked way
		// reads them.
		return nil, false, nil
	}
	if err := r.finish(); err != nil {
		return nil, true, err
	}

	start := time.Now()
	conn, err := s.DB.Conn(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("desk batch: connection: %w", err)
	}
	b := &Batch{}
	b.Exec("START TRANSACTION")
	b.Query(skipRows, "SELECT `id` FROM `fx_account` FORCE INDEX (PRIMARY) WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
	check, checkArgs := StaleCheck(ids, known, nonces)
	b.Query(skipRows, check, checkArgs...)
	b.Append(&r.Writes)
	tx := &Txn{conn: conn, Fence: fence, FenceArgs: fenceArgs, Refused: func(cause error) error { return cause }}
	defer tx.Rollback()
	if err := tx.Commit(ctx, b); err != nil {
		switch {
		case fx.ErrorCode(err) == fx.EUNKNOWN || store.ConnectionLost(err) || lease.IsFenced(err):
			// Nothing to run again: the outcome is unknown, or the fence refused the term, which
			// it would refuse on locked rows as well.
			return nil, true, err
		case !store.ServerRefused(err):
			// COMMIT went out with everything else and nothing says the server stopped before it:
			// running the batch again could write it twice.
			return nil, true, fmt.Errorf("%w: %w", errOutcomeUnknown, err)
		}
		// The server refused a statement, so it ran nothing after it, COMMIT included: a row
		// changed since it was remembered or a request nonce is a retry (store.IsStale), or
		// another statement failed (a deadlock, a constraint). The batch runs again on locked
		// rows, which judge it as they always have, and what they read replaces the memory
		// (committer.run).
		c.stale.Add(1)
		if s.Observer != nil {
			s.Observer.ObserveOneTrip(false)
		}
		return nil, false, nil
	}
	r.committed = true
	c.oneTrips.Add(1)
	if s.Observer != nil {
		s.Observer.ObserveOneTrip(true)
	}
	c.observe(len(ws), time.Since(start))
	return r, true, nil
}

// StaleCheck is one SELECT of one value that succeeds while every account of ids is as known
// remembers it — the columns a fill's rules read (owner, group, currency, leverage, state, the
// group's execution mode) and its balanceVersion, which the ledger bumps with every balance — and its
// open positions add up, per symbol and side, to exactly the remembered volumes and
// volume × price, and no order holds any of the batch's request nonces (the rules answer a retry
// with its original before judging it: on locked rows, which read the nonces). Otherwise it fails, so the server runs nothing after it: the value is the
// largest BIGINT UNSIGNED plus the finding (0 while fresh; 1, or a NULL made 1, when not), an
// overflow the server refuses with error 1690 (store.IsStale) — not the fence's 1242, so a batch
// carrying both tells which refused. The sum is the selected value itself, which the server must
// compute to send its row: in a WHERE, an optimizer may decide a condition on a sum that cannot
// be NULL without computing it (MariaDB drops "… IS NULL" so, and the check never failed).
// It reads the rows as the batch's account locks, taken just before it, let them be: every writer
// of an account's balance or positions holds that account's lock.
func StaleCheck(ids []int64, known map[int64]Remembered, nonces []NonceKey) (string, []any) {
	var args []any
	in := store.Placeholders(len(ids))
	var sb strings.Builder
	sb.WriteString("SELECT 18446744073709551615 + COALESCE(" +
		"(SELECT COUNT(*) FROM `fx_account` a WHERE (a.`id`, a.`balanceVersion`, a.`userId`, a.`accountGroup`, a.`currency`, a.`leverage`, a.`state`) IN (")
	groups := 0
	for i, id := range ids {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString("(?, ?, ?, ?, ?, ?, ?)")
		a := known[id].Account
		args = append(args, id, known[id].Version, a.UserID, a.Group, a.Currency, a.Leverage, a.State)
		groups += len(known[id].Exposures)
	}
	sb.WriteString(") AND (SELECT g.`executionMode` FROM `fx_account_group` g WHERE g.`name` = a.`accountGroup` LIMIT 1) = 'INTERNAL') <> ?")
	args = append(args, len(ids))
	if len(nonces) > 0 {
		sb.WriteString(" OR EXISTS (SELECT 1 FROM `fx_order` o WHERE (o.`accountId`, o.`requestNonce`) IN (")
		for i, k := range nonces {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString("(?, ?)")
			args = append(args, k.Account, k.Nonce)
		}
		sb.WriteString("))")
	}
	sb.WriteString(" OR (SELECT COUNT(*), ")
	if groups == 0 {
		sb.WriteString("0")
	} else {
		sb.WriteString("COALESCE(SUM((e.`accountId`, e.`symbol`, e.`side`, e.`v`, e.`vp`) IN (")
		first := true
		for _, id := range ids {
			for _, x := range known[id].Exposures {
				if !first {
					sb.WriteString(", ")
				}
				first = false
				sb.WriteString("(?, ?, ?, CAST(? AS DECIMAL(65,20)), CAST(? AS DECIMAL(65,20)))")
				args = append(args, id, x.Symbol, x.Side, x.Volume.String(), x.VolumePrice.String())
			}
		}
		sb.WriteString(")), 0)")
	}
	sb.WriteString(" FROM (SELECT p.`accountId`, p.`symbol`, p.`side`, SUM(p.`volume`) AS `v`, SUM(p.`volume` * p.`openPrice`) AS `vp` " +
		"FROM `fx_position` p WHERE p.`accountId` IN (" + in + ") AND p.`status` = 'OPEN' GROUP BY p.`accountId`, p.`symbol`, p.`side`) e) <> (?, ?), 1)")
	args = append(args, store.Int64Args(ids)...)
	args = append(args, groups, groups)
	return sb.String(), args
}
