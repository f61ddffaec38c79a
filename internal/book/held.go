package book

import (
	"database/sql"
	"slices"
	"strings"

	"fxdesk/internal/fx"
)

// Held positions: an account's open positions on one symbol, locked, oldest first. A NETTING or
// FIFO fill reads them to reduce, close or add to them (docs/orders.md, «Position modes»); a FIFO
// close reads them to know which is the oldest. A HEDGING desk never asks, so it never pays for
// them: a rule asks only when the account's exposure shows a position on the symbol, and a batch
// that did not read them is planned again with them read (as OpenExposures).

// HeldKey is one account's open positions on one symbol.
type HeldKey struct {
	Account int64
	Symbol  string
}

// Held is one open position of a HeldKey as the batch's writes left it. Var is the session
// variable holding the id of a position opened by a write of this batch (its ID is 0 until the
// batch commits); "" for a position the batch locked.
type Held struct {
	*Position
	Var string
	Idx int // Var's index among the ids the batch reads back
}

// Held plans the open positions of account on symbol, locked after the accounts.
func (l *Plan) Held(account int64, symbol string) {
	k := HeldKey{account, symbol}
	if !slices.Contains(l.held, k) {
		l.held = append(l.held, k)
	}
}

// HeldPositions is account's open positions on symbol, oldest first, as the batch's writes so far
// left them. When the batch did not read them (read false) it is planned again with them read
// before anything is written.
func (r *Rows) HeldPositions(account int64, symbol string) (held []*Held, read bool) {
	k := HeldKey{account, symbol}
	all, read := r.held[k]
	if !read {
		if !slices.Contains(r.unreadHeld, k) {
			r.unreadHeld = append(r.unreadHeld, k)
		}
		return nil, false
	}
	for _, h := range all {
		if h.Status == fx.PositionOpen && h.Volume.IsPositive() {
			held = append(held, h)
		}
	}
	return held, true
}

// Hold adds a position a write of this batch opened (p.ID 0, its id in session variable v at
// index idx) to the held positions of its account and symbol, when the batch reads them.
func (r *Rows) Hold(p *Position, v string, idx int) {
	k := HeldKey{p.AccountID, p.Symbol}
	if all, ok := r.held[k]; ok {
		r.held[k] = append(all, &Held{Position: p, Var: v, Idx: idx})
	}
}

// addHeld adds the locking read of the plan's held positions to b. The positions share the
// batch's Positions map, so a close of the same position by another write of the batch sees what
// a fill did to it, and the other way round.
func (r *Rows) addHeld(b *Batch, l *Plan) {
	r.held = map[HeldKey][]*Held{}
	if len(l.held) == 0 {
		return
	}
	var where []string
	var args []any
	for _, k := range l.held {
		r.held[k] = []*Held{}
		where = append(where, "(p.`accountId` = ? AND p.`symbol` = ?)")
		args = append(args, k.Account, k.Symbol)
	}
	b.Query(func(rows *sql.Rows) error {
		for rows.Next() {
			p, err := ScanPosition(rows)
			if err != nil {
				return err
			}
			if a, ok := r.Accounts[p.AccountID]; ok {
				p.Currency = a.Currency
			}
			pp, known := r.Positions[p.ID]
			if !known {
				pp = &p
				r.Positions[p.ID] = pp
			}
			k := HeldKey{p.AccountID, p.Symbol}
			r.held[k] = append(r.held[k], &Held{Position: pp})
		}
		return nil
	}, "SELECT "+lockedPositionCols+" FROM `fx_position` p WHERE p.`status` = 'OPEN' AND ("+strings.Join(where, " OR ")+") ORDER BY p.`openedAt`, p.`id` FOR UPDATE", args...)
}

// unreadHeld ends an attempt whose rules asked for held positions the batch did not read: it was
// rolled back with nothing written, and runs again with them read.
type unreadHeld []HeldKey

func (e unreadHeld) Error() string { return "desk batch: held positions are needed: planned again" }

// Name is the session variable whose value is read back at index i (Rows.SessionVar).
func (ids *IDs) Name(i int) string { return ids.names[i] }
