package invariant

import (
	"database/sql"
	"fmt"

	"github.com/shopspring/decimal"
)

// dbTriggerOrder is an order of docs/orders.md «Stop-limit» or «OCO pairs»: a STOP_LIMIT, or a
// leg of an OCO pair.
type dbTriggerOrder struct {
	ID         int64
	Side, Type string
	Status     string
	LimitPrice decimal.NullDecimal
	FillPrice  decimal.NullDecimal
	OCO        sql.NullInt64
	Triggered  bool // a STOP_LIMIT whose stop triggered (triggeredAt set)
}

// triggerOrdersSQL reads them for the snapshot (Snapshot.Triggers).
const triggerOrdersSQL = "SELECT `id`, `side`, `type`, `status`, `limitPrice`, `fillPrice`, `ocoOrderId`, `triggeredAt` IS NOT NULL FROM `fx_order` " +
	"WHERE `accountId` >= ? AND (`type` = 'STOP_LIMIT' OR `ocoOrderId` IS NOT NULL) ORDER BY `id`"

func scanTriggerOrder(s *Snapshot) func(*sql.Rows) error {
	return func(r *sql.Rows) error {
		var o dbTriggerOrder
		err := r.Scan(&o.ID, &o.Side, &o.Type, &o.Status, &o.LimitPrice, &o.FillPrice, &o.OCO, &o.Triggered)
		s.Triggers = append(s.Triggers, o)
		return err
	}
}

// checkOCOAtMostOneFilled: of each OCO pair at most one leg FILLED, and a FILLED leg's partner
// is not left PENDING (the fill cancels it in its own transaction); the links name each other.
func checkOCOAtMostOneFilled(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "ocoAtMostOneFilled"}
	byID := map[int64]dbTriggerOrder{}
	for _, o := range s.Triggers {
		byID[o.ID] = o
	}
	pairs, filled := 0, 0
	for _, o := range s.Triggers {
		if !o.OCO.Valid || o.OCO.Int64 < o.ID {
			continue // each pair once, from its lower id
		}
		pairs++
		p, ok := byID[o.OCO.Int64]
		if !ok || !p.OCO.Valid || p.OCO.Int64 != o.ID {
			r.Add("", "OCO order %d names %d, which does not name it back", o.ID, o.OCO.Int64)
			continue
		}
		switch {
		case o.Status == "FILLED" && p.Status == "FILLED":
			r.Add("", "OCO pair %d/%d: both legs FILLED", o.ID, p.ID)
		case o.Status == "FILLED" && p.Status == "PENDING", p.Status == "FILLED" && o.Status == "PENDING":
			r.Add("", "OCO pair %d/%d: one leg FILLED, the other still PENDING (%s/%s)", o.ID, p.ID, o.Status, p.Status)
		case o.Status == "FILLED" || p.Status == "FILLED":
			filled++
		}
	}
	r.Figures = fmt.Sprintf("%d OCO pairs, %d with one leg filled", pairs, filled)
	return r
}

// checkStopLimitWithinLimit: a FILLED STOP_LIMIT filled at or better than its limit, markup
// included (a buy at or below it, a sell at or above) — a gap past the limit rests, never fills
// at the gapped price.
func checkStopLimitWithinLimit(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "stopLimitWithinLimit"}
	n, filled := 0, 0
	for _, o := range s.Triggers {
		if o.Type != "STOP_LIMIT" {
			continue
		}
		n++
		if o.Status != "FILLED" {
			continue
		}
		filled++
		if !o.LimitPrice.Valid || !o.FillPrice.Valid {
			r.Add("", "STOP_LIMIT %d is FILLED without a limit or fill price", o.ID)
			continue
		}
		lim, px := o.LimitPrice.Decimal, o.FillPrice.Decimal
		if (o.Side == "BUY" && px.GreaterThan(lim)) || (o.Side == "SELL" && px.LessThan(lim)) {
			r.Add("", "STOP_LIMIT %d (%s) filled at %s, worse than its limit %s", o.ID, o.Side, px, lim)
		}
	}
	r.Figures = fmt.Sprintf("%d STOP_LIMIT orders, %d filled", n, filled)
	return r
}

// stopLimitsTriggered is, by order id, the order.stop_triggered events each order must have been
// told by (checkEvents): one for a STOP_LIMIT whose stop triggered, none otherwise.
func stopLimitsTriggered(s *Snapshot) map[int64]int {
	out := map[int64]int{}
	for _, o := range s.Triggers {
		if o.Type == "STOP_LIMIT" && o.Triggered {
			out[o.ID] = 1
		}
	}
	return out
}
