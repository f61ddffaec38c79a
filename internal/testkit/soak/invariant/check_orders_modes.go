package invariant

import (
	"fmt"
	"time"
)

// The position modes' invariants (docs/orders.md, «Position modes»; docs/soak.md, «The order
// lane»), judged on the positions of the accounts whose group is NETTING or FIFO at the end.
// The soak's mode traders never change group, so the group at the end is the group they traded in.

// modeAccounts are the accounts whose group's position mode is mode.
func modeAccounts(s *Snapshot, mode string) map[int64]bool {
	out := map[int64]bool{}
	for _, a := range s.Accounts {
		if s.PositionModes[a.Group] == mode {
			out[a.ID] = true
		}
	}
	return out
}

// openBySymbol counts the open positions of accounts, by account, symbol and side.
func openBySymbol(s *Snapshot, accounts map[int64]bool) map[string][]dbPosition {
	out := map[string][]dbPosition{}
	for _, p := range s.Positions {
		if accounts[p.Account] && p.Status == "OPEN" {
			k := fmt.Sprintf("account %d %s", p.Account, p.Symbol)
			out[k] = append(out[k], p)
		}
	}
	return out
}

// A NETTING account never holds two open positions on one symbol.
func checkNettingOnePosition(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "nettingOnePosition"}
	accounts := modeAccounts(s, "NETTING")
	for k, ps := range openBySymbol(s, accounts) {
		if len(ps) > 1 {
			r.Add(k, "NETTING %s holds %d open positions (%d, %d, …)", k, len(ps), ps[0].ID, ps[1].ID)
		}
	}
	r.Figures = fmt.Sprintf("%d NETTING accounts, %s", len(accounts), nettedFigures(s, accounts))
	return r
}

// A FIFO account never holds both sides of a symbol.
func checkFIFOOneSide(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "fifoOneSide"}
	accounts := modeAccounts(s, "FIFO")
	for k, ps := range openBySymbol(s, accounts) {
		for _, p := range ps[1:] {
			if p.Side != ps[0].Side {
				r.Add(k, "FIFO %s holds both sides: position %d %s and %d %s", k, ps[0].ID, ps[0].Side, p.ID, p.Side)
				break
			}
		}
	}
	r.Figures = fmt.Sprintf("%d FIFO accounts, %s", len(accounts), nettedFigures(s, accounts))
	return r
}

// fifoSameClose is how far apart the closes of one transaction may be stamped: each statement
// reads its own clock (NOW(3)), and a fill's closes are several statements.
const fifoSameClose = time.Second

// A FIFO account closes its oldest first: no position of it was closed (by the trader, a netting
// fill or a stop) while an older open position of the same symbol and side stayed open. A
// dealer's close is the desk's own correction and is not judged.
func checkFIFOOldestFirst(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "fifoOldestFirst"}
	accounts := modeAccounts(s, "FIFO")
	by := map[string][]dbPosition{}
	for _, p := range s.Positions {
		if accounts[p.Account] {
			k := fmt.Sprintf("%d %s %s", p.Account, p.Symbol, p.Side)
			by[k] = append(by[k], p)
		}
	}
	closes := 0
	for _, ps := range by {
		for _, p := range ps {
			if !p.ClosedAt.Valid || (p.CloseReason.Valid && p.CloseReason.String == "DEALER") {
				continue
			}
			closes++
			for _, q := range ps {
				older := q.OpenedAt.Before(p.OpenedAt) || (q.OpenedAt.Equal(p.OpenedAt) && q.ID < p.ID)
				stayed := !q.ClosedAt.Valid || q.ClosedAt.Time.After(p.ClosedAt.Time.Add(fifoSameClose))
				if older && stayed {
					r.Add(fmt.Sprint(p.ID), "FIFO account %d: position %d (%s %s, opened %s) closed (%s) at %s while the older %d (opened %s) stayed open",
						p.Account, p.ID, p.Symbol, p.Side, p.OpenedAt.Format(time.RFC3339Nano), p.CloseReason.String, p.ClosedAt.Time.Format(time.RFC3339Nano),
						q.ID, q.OpenedAt.Format(time.RFC3339Nano))
					break
				}
			}
		}
	}
	r.Figures = fmt.Sprintf("%d FIFO closes judged", closes)
	return r
}
