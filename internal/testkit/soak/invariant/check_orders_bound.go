package invariant

import (
	"fmt"

	"github.com/shopspring/decimal"
)

// Price bounds and fill policies on MARKET orders (docs/orders.md, «Price bound», «IOC and
// FOK»): an order is never filled past its bound, a FOK never partly booked, and an IOC's part
// is exactly what its position holds.

// dbPolicy is a MARKET order with a price bound or a fill policy (IOC, FOK).
type dbPolicy struct {
	ID                    int64
	Side, TimeInForce     string
	Status                string
	Volume                decimal.Decimal
	PriceBound, FillPrice decimal.NullDecimal
	FilledVolume          decimal.NullDecimal
}

const policiesSQL = "SELECT `id`, `side`, `timeInForce`, `status`, `volume`, `priceBound`, `filledVolume`, `fillPrice` FROM `fx_order` " +
	"WHERE `accountId` >= ? AND `type` = 'MARKET' AND (`priceBound` IS NOT NULL OR `timeInForce` IN ('IOC', 'FOK')) ORDER BY `id`"

// openVolumes is each order's position's opening volume (openVolume: what the fill opened,
// before any partial close), and on a netted account the lots its fill booked.
func openVolumes(s *Snapshot) map[int64]decimal.Decimal {
	out := map[int64]decimal.Decimal{}
	netted := nettedAccounts(s)
	for _, p := range s.Positions {
		if !netted[p.Account] {
			out[p.Order] = p.OpenVolume
		}
	}
	// A netted account's fill may reduce and add rather than open: what it booked is what its
	// events net (check_netted.go).
	for id, f := range nettedFills(s, netted) {
		out[id] = f.volume
	}
	return out
}

// checkBoundHonoured: no order filled past its priceBound — a BUY's fill price (markup
// included) at or below it, a SELL's at or above it — and a filled bounded order's position
// opened at that price.
func checkBoundHonoured(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "ordersWithinPriceBound"}
	filled, refused := 0, 0
	opened := map[int64]decimal.Decimal{}
	netted := nettedAccounts(s)
	openedAt := nettedOpenPrices(s, netted) // check_netted.go: a NETTING add moves openPrice
	for _, p := range s.Positions {
		if !netted[p.Account] {
			opened[p.Order] = p.OpenPrice
		} else if px, ok := openedAt[p.ID]; ok {
			opened[p.Order] = px
		}
	}
	for _, o := range s.Policies {
		if !o.PriceBound.Valid {
			continue
		}
		if o.Status != "FILLED" {
			refused++
			continue
		}
		filled++
		b := o.PriceBound.Decimal
		if !o.FillPrice.Valid {
			r.Add("", "order %d is FILLED with no fill price (bound %s)", o.ID, b)
			continue
		}
		px := o.FillPrice.Decimal
		if (o.Side == "BUY" && px.GreaterThan(b)) || (o.Side == "SELL" && px.LessThan(b)) {
			r.Add("", "order %d, a %s bounded at %s, filled at %s: past its bound", o.ID, o.Side, b, px)
		}
		if op, ok := opened[o.ID]; ok && !op.Equal(px) {
			r.Add("", "order %d filled at %s, its position opened at %s", o.ID, px, op)
		}
	}
	r.Figures = fmt.Sprintf("%d bounded orders filled within their bound, %d refused or rejected", filled, refused)
	return r
}

// checkFOKWhole: no FOK partly booked — a FOK order has no filledVolume, and a filled one's
// position opened its whole volume.
func checkFOKWhole(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "fokNeverPartlyBooked"}
	vols := openVolumes(s)
	n := 0
	for _, o := range s.Policies {
		if o.TimeInForce != "FOK" {
			continue
		}
		n++
		if o.FilledVolume.Valid {
			r.Add("", "FOK order %d has filledVolume %s of %s", o.ID, o.FilledVolume.Decimal, o.Volume)
		}
		if v, ok := vols[o.ID]; ok && !v.Equal(o.Volume) {
			r.Add("", "FOK order %d of %s lots opened a position of %s", o.ID, o.Volume, v)
		}
	}
	r.Figures = fmt.Sprintf("%d FOK orders", n)
	return r
}

// checkIOCPart: an IOC the venue filled part of is FILLED, its filledVolume below its volume
// and equal to what its position opened; an IOC filled whole opened all of it.
func checkIOCPart(s *Snapshot, _ *Evidence) Result {
	r := Result{Name: "iocPartBooked"}
	vols := openVolumes(s)
	n, parts := 0, 0
	for _, o := range s.Policies {
		if o.TimeInForce != "IOC" {
			continue
		}
		n++
		want := o.Volume
		if o.FilledVolume.Valid {
			parts++
			want = o.FilledVolume.Decimal
			if o.Status != "FILLED" || !want.IsPositive() || !want.LessThan(o.Volume) {
				r.Add("", "IOC order %d (%s) has filledVolume %s of %s", o.ID, o.Status, want, o.Volume)
			}
		}
		if v, ok := vols[o.ID]; ok && !v.Equal(want) {
			r.Add("", "IOC order %d opened a position of %s lots; want %s", o.ID, v, want)
		}
	}
	r.Figures = fmt.Sprintf("%d IOC orders, %d filled in part", n, parts)
	return r
}
