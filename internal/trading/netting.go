package trading

import (
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
)

// A fill on a NETTING or FIFO account (docs/orders.md, «Position modes»). HEDGING, the default,
// opens a position per fill (openPosition). The two other modes first take the fill's volume
// off the account's opposite positions on the symbol, oldest first — a partial close, a close,
// or several — with reason NETTED; what remains adds to the one same-side position (NETTING) or
// opens a new one (FIFO, or NETTING with none), which is a reversal when anything was closed.
// Every step is a write of the same batch, on rows the batch locked (book.Rows.HeldPositions),
// so a fill racing a close of the same position sees it or is seen by it.

// openPriceScale is the decimals a NETTING position's volume-weighted open price keeps: the
// column's (DECIMAL(20,10)). Rounding there moves a profit by at most 5e-11 × the position's
// units, far below any currency's minor unit.
const openPriceScale = 10

// positionModeOf is the position mode of locked account a's group.
func positionModeOf(cat *catalog.Catalog, a *book.Account) fx.PositionMode {
	if m := cat.AccountGroup(a.Group).PositionMode; m.Valid() {
		return m
	}
	return fx.Hedging
}

// netLeg is lots a fill takes off one opposite position.
type netLeg struct {
	h      *book.Held
	volume decimal.Decimal
}

// netPlan is what a fill of volume lots on side does on a NETTING or FIFO account to its open
// positions held on the symbol (oldest first).
type netPlan struct {
	legs  []netLeg        // opposite positions reduced or closed, oldest first
	addTo *book.Held      // NETTING: the same-side position the rest adds to; nil: rest opens one
	rest  decimal.Decimal // lots left once the legs are taken
}

// planNet decides a fill: a pure function of the mode, the fill and the positions.
func planNet(mode fx.PositionMode, side fx.Side, volume decimal.Decimal, held []*book.Held) netPlan {
	p := netPlan{rest: volume}
	for _, h := range held {
		if h.Side == side || !p.rest.IsPositive() {
			continue
		}
		v := decimal.Min(p.rest, h.Volume)
		p.legs = append(p.legs, netLeg{h: h, volume: v})
		p.rest = p.rest.Sub(v)
	}
	if mode == fx.Netting && p.rest.IsPositive() {
		for _, h := range held {
			if h.Side == side {
				p.addTo = h
				break
			}
		}
	}
	return p
}

// netFill is a fill's writes on a NETTING or FIFO account, read back once its batch committed.
type netFill struct {
	s        *Service
	order    book.Order
	orderIdx int // the filled order's id among the batch's session variables
	plan     netPlan
	legVars  []int // each leg's position id among the session variables
	addVar   int   // plan.addTo's id, when set
	opened   *openedFill
	newPos   *book.Position // the position opened, as held by the batch
	dealIdx  int            // the commission deal of an add, or -1
	trades   []routing.Profile
}

// netPlanOf reads the locked positions of account a on in's symbol and plans a fill of volume
// lots on side at price: the positions it reduces, and for the lots that remain the commission
// and the account's marks after them, checked as an open of those lots on the account as the
// reductions leave it (fillCheck). Lots that only reduce pay no commission, as a close pays
// none. Nothing is written. The positions are read only when the exposure shows one on the
// symbol, so a NETTING account's first fill on a symbol costs what a HEDGING one's does.
func netPlanOf(r *book.Rows, a *book.Account, in catalog.Instrument, mode fx.PositionMode, side fx.Side, volume, price decimal.Decimal) (netPlan, decimal.Decimal, *book.Metrics, error) {
	exps, read := r.OpenExposures(a.ID)
	if !read {
		return netPlan{}, decimal.Zero, nil, errPlanAgain
	}
	var held []*book.Held
	for _, e := range exps {
		if e.Symbol == in.Symbol && e.Volume.IsPositive() {
			if held, read = r.HeldPositions(a.ID, in.Symbol); !read {
				return netPlan{}, decimal.Zero, nil, errPlanAgain
			}
			break
		}
	}
	plan := planNet(mode, side, volume, held)
	if !plan.rest.IsPositive() {
		return plan, decimal.Zero, nil, nil
	}
	if rest := plan.rest; len(plan.legs) > 0 && plan.addTo == nil && rest.LessThan(in.VolumeMin) {
		return plan, decimal.Zero, nil, fx.Errorf(fx.EINVALID, "This order of %s lots would reverse the position and open %s lots, below %s's minimum of %s: send %s lots to close it, or more to reverse it.",
			volume, rest, in.Symbol, in.VolumeMin, volume.Sub(rest))
	}
	// The account as the reductions leave it: their profit in the balance, their lots out of
	// the exposures.
	after := *a
	left := append([]book.Exposure(nil), exps...)
	for _, l := range plan.legs {
		profit, ok := r.Market.Convert(book.ProfitQuote(in, l.h.Side, l.volume, l.volume.Mul(l.h.OpenPrice), price), in.Quote, a.Currency)
		if !ok {
			return plan, decimal.Zero, nil, book.ErrPricing()
		}
		after.Balance = after.Balance.Add(fx.RoundMoney(a.Currency, profit))
		left = exposeOn(left, in.Symbol, l.h.Side, l.volume.Neg(), l.volume.Mul(l.h.OpenPrice).Neg())
	}
	commission, marks, err := fillCheck(r.Market, r.Catalog, in, after, left, side, plan.rest, price)
	if err != nil {
		return plan, decimal.Zero, nil, err
	}
	return plan, commission, &marks, nil
}

// netDecision is a NETTING or FIFO fill as fillCheckMode checked it: its plan, the commission
// of the lots it opens or adds, and the account's marks after them (nil when it only reduces).
type netDecision struct {
	plan       netPlan
	commission decimal.Decimal
	marks      *book.Metrics
}

// fillCheckMode is fillCheck for the locked account a in its group's position mode: a HEDGING
// fill is checked as the open it is (net nil); a NETTING or FIFO fill is planned and checked by
// netPlanOf, and is written by writeNet instead of openPosition.
func fillCheckMode(r *book.Rows, a *book.Account, in catalog.Instrument, side fx.Side, volume, price decimal.Decimal) (decimal.Decimal, book.Metrics, *netDecision, error) {
	mode := positionModeOf(r.Catalog, a)
	if mode == fx.Hedging {
		commission, after, err := fillCheck(r.Market, r.Catalog, in, *a, r.Exposures[a.ID], side, volume, price)
		return commission, after, nil, err
	}
	plan, commission, marks, err := netPlanOf(r, a, in, mode, side, volume, price)
	if err != nil {
		return decimal.Zero, book.Metrics{}, nil, err
	}
	return commission, book.Metrics{}, &netDecision{plan: plan, commission: commission, marks: marks}, nil
}

// errModeExternal refuses an order the routing sends to the venue from a NETTING or FIFO
// account: the A-book is hedging only (catalog.checkPositionMode says why).
func errModeExternal(a *book.Account, mode fx.PositionMode) error {
	return fx.Errorf(fx.ECONFLICT, "Account %d is %s and this order is routed to the execution venue, which holds one trade per position: only HEDGING accounts trade through the venue.", a.ID, mode)
}

// errPlanAgain answers a rule that asked for rows its batch did not read: the batch is planned
// again with them, and this answer is never seen.
var errPlanAgain = fmt.Errorf("desk batch: rows needed: planned again")

// exposeOn is exps with volume (and volume × price) moved on symbol and side, a copy.
func exposeOn(exps []book.Exposure, symbol string, side fx.Side, volume, volumePrice decimal.Decimal) []book.Exposure {
	out := exps[:0:0]
	for _, e := range exps {
		if e.Symbol == symbol && e.Side == side {
			e.Volume, e.VolumePrice = e.Volume.Add(volume), e.VolumePrice.Add(volumePrice)
			if !e.Volume.IsPositive() {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// writeNet adds plan's writes to the batch, after the statements that set orderVar to the
// filled order o's id: the legs closed at price with reason NETTED, then the rest added to the
// same-side position or opened, with the commission and marks netPlanOf computed. orderEvent
// (order.filled, order.triggered) names the position the fill left: the one it added to or
// opened, or the first one it reduced.
func (s *Service) writeNet(r *book.Rows, a *book.Account, in catalog.Instrument, o book.Order, orderVar string, price decimal.Decimal, d *netDecision,
	orderEvent events.Type) (*netFill, error) {
	plan, commission, marks := d.plan, d.commission, d.marks
	f := &netFill{s: s, order: o, orderIdx: r.IDs.Index(orderVar), plan: plan, dealIdx: -1}
	resultVar := ""
	for i, l := range plan.legs {
		v, idx := heldVar(r, l.h)
		f.legVars = append(f.legVars, idx)
		if resultVar == "" {
			resultVar = v
		}
		_, trade, err := closeLeg(r, a, in, l.h, v, l.volume, price, fx.CloseNetted, nettedDeal(positionModeOf(r.Catalog, a), l.h, v, orderVar, i), s.term())
		if err != nil {
			return nil, err
		}
		f.trades = append(f.trades, trade)
	}
	switch {
	case !plan.rest.IsPositive():
	case plan.addTo != nil:
		v, idx := heldVar(r, plan.addTo)
		f.addVar, resultVar = idx, v
		if err := s.addToPosition(r, a, in, plan.addTo, v, orderVar, plan.rest, price, commission, f); err != nil {
			return nil, err
		}
		r.Marks[a.ID] = *marks
	default:
		rest := o
		rest.Volume = plan.rest
		// The order's own event is written below, with its whole volume.
		opened, err := openPosition(r, a, in, rest, orderVar, price, commission, marks, nil, "", s.term())
		if err != nil {
			return nil, err
		}
		f.opened = &opened
		p := opened.pos
		f.newPos = &p
		v := r.IDs.Name(opened.posID)
		r.Hold(f.newPos, v, opened.posID)
		resultVar = v
	}
	filled := o
	filled.PositionID = new(int64)
	return f, addOrderEvent(r, a, orderEvent, filled, orderVar, resultVar, s.term())
}

// nettedDeal is the key (and ids) of the deal of the i-th leg of a fill on an account in mode: a
// close's own key (closeKey), like any close of the position; for a position this batch
// opened (its id not known yet) the key names the filling order instead, whose id the ledger
// appends (ledger.Deal.IDsFrom).
func nettedDeal(mode fx.PositionMode, h *book.Held, v, orderVar string, i int) book.Deal {
	if h.Var == "" {
		return book.Deal{IdempotencyKey: closeKey(mode, h.Position, h.Volume)}
	}
	return book.Deal{IdempotencyKey: fmt.Sprintf("close:netted:%d:order:", i), IDsFrom: &ledger.SessionIDs{Order: orderVar, Position: v}}
}

// heldVar is a session variable holding held position h's id, and its index: the one that
// holds it already for a position this batch opened, a new one set to its id otherwise.
func heldVar(r *book.Rows, h *book.Held) (string, int) {
	if h.Var != "" {
		return h.Var, h.Idx
	}
	v, idx := r.SessionVar("p")
	r.Writes.Exec(book.SetVarSQL(v, "?"), h.ID)
	return v, idx
}

// addToPosition adds volume lots at price to NETTING position h (its id in session variable
// v): its volume and openVolume grow, its open price becomes the volume-weighted average, and
// the commission of the added lots is charged as at an open. SL and TP stay (as MT5 keeps them).
func (s *Service) addToPosition(r *book.Rows, a *book.Account, in catalog.Instrument, h *book.Held, v, orderVar string, volume, price, commission decimal.Decimal, f *netFill) error {
	p := h.Position
	oldValue := p.Volume.Mul(p.OpenPrice)
	p.Volume = p.Volume.Add(volume)
	p.OpenVolume = p.OpenVolume.Add(volume)
	p.OpenPrice = oldValue.Add(volume.Mul(price)).Div(p.Volume).Round(openPriceScale)
	p.Commission = p.Commission.Add(commission)
	r.Writes.Exec("UPDATE `fx_position` SET `volume` = ?, `openVolume` = ?, `openPrice` = ?, `commission` = ? WHERE `id` = "+v,
		p.Volume, p.OpenVolume, p.OpenPrice, p.Commission)
	// The exposure moves by exactly what the row's volume × open price moved, so that it stays
	// the sum the database would give.
	r.Expose(a.ID, p.Symbol, p.Side, volume, p.Volume.Mul(p.OpenPrice).Sub(oldValue))
	if commission.IsPositive() {
		side, sym, vol := p.Side, p.Symbol, volume
		f.dealIdx = r.Post(a, book.Deal{Type: fx.DealCommission, Amount: commission.Neg(), Symbol: &sym, Side: &side, Volume: &vol, Price: &price,
			IdempotencyKey: "commission:order:", Comment: "commission at netting add", IDsFrom: &ledger.SessionIDs{Order: orderVar, Position: v}})
	}
	var from []events.SessionField
	if h.Var != "" {
		from = []events.SessionField{{Field: "id", Var: v}}
	}
	return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.PositionModified, Payload: events.PositionOf(*p), Term: s.term(),
		FromSession: from})
}

// closeLeg closes vol lots of held position h (its id in session variable v) at price for
// reason, on the locked account a: its profit deal (d carries the deal's idempotency key and,
// where the ids are session variables, IDsFrom), its event, its profile trade, and its row — at
// the end of the batch with the batch's other closes, or by its own statement for a position
// this batch opened (its id is not known yet). It returns the deal's index in the batch.
func closeLeg(r *book.Rows, a *book.Account, in catalog.Instrument, h *book.Held, v string, vol, price decimal.Decimal, reason fx.CloseReason, d book.Deal, term int64) (int, routing.Profile, error) {
	p := h.Position
	profit, ok := r.Market.Convert(book.ProfitQuote(in, p.Side, vol, vol.Mul(p.OpenPrice), price), in.Quote, a.Currency)
	if !ok {
		return -1, routing.Profile{}, book.ErrPricing()
	}
	p.Volume = p.Volume.Sub(vol)
	p.RealizedProfit = p.RealizedProfit.Add(profit)
	if p.Volume.IsZero() {
		recorded, now, at := string(reason), r.Now, price
		p.Status, p.ClosedAt, p.CloseReason, p.ClosePrice = fx.PositionClosed, &now, &recorded, &at
	}
	if h.Var == "" {
		r.Closing(p)
	} else if p.Status == fx.PositionClosed {
		r.Writes.Exec("UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ?, `closePrice` = ?, `status` = 'CLOSED', `closeReason` = ?, `closedAt` = NOW(3) WHERE `id` = "+v,
			p.Volume, p.RealizedProfit, p.ClosePrice, p.CloseReason)
	} else {
		r.Writes.Exec("UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ? WHERE `id` = "+v, p.Volume, p.RealizedProfit)
	}
	r.Expose(a.ID, p.Symbol, p.Side, vol.Neg(), vol.Mul(p.OpenPrice).Neg())
	side, sym := p.Side, p.Symbol
	d.Type, d.Amount, d.Symbol, d.Side, d.Volume, d.Price = fx.DealProfit, profit, &sym, &side, &vol, &price
	d.Markup = r.Market.Markup(in, vol, a.Currency)
	d.Comment = "close " + strings.ToLower(string(reason))
	if d.IDsFrom == nil {
		d.OrderID, d.PositionID = &p.OrderID, &p.ID
	}
	idx := r.Post(a, d)
	trade := routing.Trade(r.Deals[idx].Amount, r.Now.Sub(p.OpenedAt))
	closedAt := r.Now
	trade.LastTradeAt = &closedAt
	addTrade(&r.Writes, a.ID, trade)
	kind := events.PositionPartlyClosed
	if p.Status == fx.PositionClosed {
		kind = events.PositionClosed
	}
	var from []events.SessionField
	if h.Var != "" {
		from = []events.SessionField{{Field: "id", Var: v}}
	}
	err := events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: kind, Term: term, FromSession: from,
		Payload: events.Closed{Position: events.PositionOf(*p), ClosedVolume: vol.String(), Price: price.String(),
			Profit: fx.FormatMoney(a.Currency, profit), Reason: string(reason)}})
	return idx, trade, err
}

// committed is the fill as committed: the position it left (added to, opened, or the first
// reduced) and the changes the risk engine must learn, in the order they happened.
func (f *netFill) committed(r *book.Rows, ids *book.IDs, a book.Account) (book.Order, *book.Position, *book.Deal, []risk.Change) {
	o := f.order
	o.ID = ids.Values[f.orderIdx]
	var changes []risk.Change
	var result *book.Position
	for i, l := range f.plan.legs {
		p := *l.h.Position
		p.ID = ids.Values[f.legVars[i]]
		if p.Status == fx.PositionClosed {
			changes = append(changes, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: p.ID}})
		} else {
			changes = append(changes, risk.Change{Kind: risk.PositionReduced, Position: risk.Position{ID: p.ID, Volume: p.Volume.InexactFloat64()}})
		}
		if result == nil {
			result = &p
		}
	}
	var deal *book.Deal
	switch {
	case f.plan.addTo != nil:
		p := *f.plan.addTo.Position
		p.ID = ids.Values[f.addVar]
		// Re-indexed whole: its volume and open price both moved.
		changes = append(changes, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: p.ID}}, positionOpened(p))
		result = &p
		if f.dealIdx >= 0 {
			d := r.DealAt(f.dealIdx, ids)
			deal = &d
		}
	case f.opened != nil:
		p, d := f.opened.written(r, ids)
		changes = append(changes, positionOpened(p))
		result, deal = &p, d
	}
	if result != nil {
		o.PositionID = &result.ID
	}
	for _, t := range f.trades {
		f.s.profiles.closed(a.ID, t)
	}
	return o, result, deal, append(changes, balanceChanged(a))
}

// addOrderEvent writes orderEvent of filled order o, with its id and its position's from
// session variables; none when orderEvent is "".
func addOrderEvent(r *book.Rows, a *book.Account, orderEvent events.Type, o book.Order, orderVar, posVar string, term int64) error {
	if orderEvent == "" {
		return nil
	}
	return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: orderEvent, Payload: events.OrderOf(o), Term: term,
		FromSession: []events.SessionField{{Field: "id", Var: orderVar}, {Field: "positionId", Var: posVar}}})
}
