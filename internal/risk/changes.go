package risk

import (
	"context"
	"log/slog"
	"maps"
)

func (e *Engine) addPositionLocked(ps Position) {
	if old, ok := e.posByID[ps.ID]; ok {
		e.removePositionLocked(old)
	}
	a := e.accountFor(ps.AccountID)
	b := e.bookFor(ps.Symbol)
	idx := takeIndex(&e.pos, &e.posFree, &e.posSlots, 2)
	e.pos[idx] = position{id: ps.ID, volume: ps.Volume, open: ps.OpenPrice, sl: ps.SL, tp: ps.TP, trailD: ps.TrailDistance, tlevel: ps.TrailLevel,
		acct: a.idx, sym: b.idx, inAcct: int32(len(a.positions)), side: ps.Side, live: true}
	if a.positions == nil {
		a.positions = make([]int32, 0, 4)
	}
	a.positions = append(a.positions, idx)
	e.posByID[ps.ID] = idx
	b.watched++
	e.exposeLocked(&e.pos[idx], 1)
	e.indexPositionLocked(idx)
}

func (e *Engine) removePositionLocked(idx int32) {
	p := &e.pos[idx]
	a := e.accts[p.acct]
	if p.closing {
		a.pending -= p.est
		e.markStaleLocked(a)
	} else {
		e.exposeLocked(p, -1)
		e.unindexPositionLocked(idx)
	}
	last := len(a.positions) - 1
	if moved := a.positions[last]; int(p.inAcct) != last {
		a.positions[p.inAcct] = moved
		e.pos[moved].inAcct = p.inAcct
	}
	a.positions = a.positions[:last]
	if p.skip != skipNone {
		a.skips--
	}
	delete(e.posByID, p.id)
	e.books[p.sym].watched--
	*p = position{}
	e.posFree = append(e.posFree, idx)
}

func (e *Engine) addOrderLocked(os Order) {
	if old, ok := e.ordByID[os.ID]; ok {
		e.removeOrderLocked(old)
	}
	b := e.bookFor(os.Symbol)
	idx := takeIndex(&e.ord, &e.ordFree, &e.ordSlots, 1)
	o := order{id: os.ID, price: os.Price, sym: b.idx, side: os.Side, typ: os.Type, live: true}
	if !os.ExpiresAt.IsZero() {
		o.exp = os.ExpiresAt.UnixNano()
	}
	e.ord[idx] = o
	e.ordByID[os.ID] = idx
	e.indexOrderLocked(idx)
	b.watched++
}

func (e *Engine) removeOrderLocked(idx int32) {
	o := &e.ord[idx]
	if !o.filling {
		e.unindexOrderLocked(idx)
	}
	delete(e.ordByID, o.id)
	e.books[o.sym].watched--
	*o = order{}
	e.ordFree = append(e.ordFree, idx)
}

func (e *Engine) setInstrumentLocked(in Instrument) {
	if cur := e.instruments[in.Symbol]; cur != nil {
		*cur = in
	} else {
		c := in
		e.instruments[in.Symbol] = &c
	}
	// CCYUSD wins over USDCCY, as in the trading core's hub.
	e.legs = map[string]leg{}
	for _, in := range e.instruments {
		if in.Quote == "USD" {
			e.legs[in.Base] = leg{symbol: in.Symbol}
		}
	}
	for _, in := range e.instruments {
		if _, ok := e.legs[in.Quote]; in.Base == "USD" && !ok {
			e.legs[in.Quote] = leg{symbol: in.Symbol, inverted: true}
		}
	}
}

// setGroupTermsLocked replaces an account group's own symbol terms; the caller re-marks its
// accounts.
func (e *Engine) setGroupTermsLocked(g GroupTerms) {
	if e.groupTerms == nil {
		e.groupTerms = map[string]map[string]SymbolTerms{}
	}
	if len(g.Symbols) == 0 {
		delete(e.groupTerms, g.Group)
		return
	}
	e.groupTerms[g.Group] = g.Symbols
}

func (e *Engine) setAccountLocked(ac Account) {
	a := e.accountFor(ac.ID)
	a.Account = ac
	a.known = true
	e.redepLocked(a) // currency, leverage or group cap may have changed
}

// applyLocked applies one committed change.
func (e *Engine) applyLocked(ctx context.Context, c Change) {
	switch c.Kind {
	case PositionOpened:
		e.addPositionLocked(c.Position)
	case PositionModified:
		idx, ok := e.posByID[c.Position.ID]
		if !ok {
			return
		}
		p := &e.pos[idx]
		p.sl, p.tp = c.Position.SL, c.Position.TP
		if p.closing {
			return // re-indexed with these values if the close does not happen
		}
		sl, tp := e.books[p.sym].stopHeaps(p.side)
		setStop(sl, 2*idx, p.sl)
		setStop(tp, 2*idx+1, p.tp)
	case TrailSet:
		e.setTrailLocked(c.Position)
	case PositionReduced:
		idx, ok := e.posByID[c.Position.ID]
		if !ok {
			return
		}
		p := &e.pos[idx]
		if p.closing {
			if p.volume > 0 {
				a := e.accts[p.acct]
				est := p.est * c.Position.Volume / p.volume
				a.pending += est - p.est
				p.est = est
				e.markStaleLocked(a)
			}
			p.volume = c.Position.Volume
			return
		}
		e.exposeLocked(p, -1)
		p.volume = c.Position.Volume
		e.exposeLocked(p, 1)
	case PositionClosed:
		if idx, ok := e.posByID[c.Position.ID]; ok {
			e.removePositionLocked(idx)
		}
	case OrderPlaced:
		e.addOrderLocked(c.Order)
	case OrderModified:
		e.modifyOrderLocked(c.Order)
	case OrderCancelled, OrderFilled, OrderExpired:
		if idx, ok := e.ordByID[c.Order.ID]; ok {
			e.removeOrderLocked(idx)
		}
	case AccountUpserted:
		e.setAccountLocked(c.Account)
	case BalanceChanged:
		a := e.accountFor(c.Account.ID)
		a.Balance = c.Account.Balance
		e.markStaleLocked(a)
	case AccountTermsChanged:
		a := e.accountFor(c.Account.ID)
		t := c.Account
		if a.Group == t.Group && a.GroupLeverage == t.GroupLeverage && a.MarginCallLevel == t.MarginCallLevel && a.StopOutLevel == t.StopOutLevel {
			return // told again what it holds: nothing to re-mark
		}
		a.Group, a.GroupLeverage, a.MarginCallLevel, a.StopOutLevel = t.Group, t.GroupLeverage, t.MarginCallLevel, t.StopOutLevel
		// The group decides each symbol's markup and leverage cap (GroupTerms) and the group's cap
		// every margin: the exposures take them again, and the account is re-marked on the next
		// tick against its new levels.
		e.redepLocked(a)
	case InstrumentUpserted:
		if cur := e.instruments[c.Instrument.Symbol]; cur != nil && *cur == c.Instrument {
			return
		}
		e.setInstrumentLocked(c.Instrument)
		for _, a := range e.accts {
			e.redepLocked(a)
		}
	case GroupTermsSet:
		if maps.Equal(e.groupTerms[c.GroupTerms.Group], c.GroupTerms.Symbols) {
			return // nil and empty alike: a group without terms of its own stays without
		}
		e.setGroupTermsLocked(c.GroupTerms)
		for _, a := range e.accts {
			if a.Group == c.GroupTerms.Group {
				e.redepLocked(a)
			}
		}
	default:
		e.log.ErrorContext(ctx, "risk view: unknown change ignored", slog.Int("kind", int(c.Kind)))
	}
}

// installLocked replaces the view with s's.
func (e *Engine) installLocked(s Snapshot) {
	e.view = newView()
	e.pos = make([]position, 0, len(s.Positions))
	e.posSlots = make([]int32, 0, 2*len(s.Positions))
	e.ord = make([]order, 0, len(s.Orders))
	e.ordSlots = make([]int32, 0, len(s.Orders))
	e.accts = make([]*account, 0, len(s.Accounts))
	e.addTermsLocked(s.Instruments, s.Groups)
	e.addAccountsLocked(s.Accounts)
	e.addPositionsLocked(s.Positions)
	e.addOrdersLocked(s.Orders)
}

// addTermsLocked adds the instruments and the account groups' own terms to a view that holds no
// account yet.
func (e *Engine) addTermsLocked(instruments []Instrument, groups []GroupTerms) {
	for _, in := range instruments {
		c := in
		e.instruments[in.Symbol] = &c
	}
	if len(instruments) > 0 {
		e.setInstrumentLocked(instruments[0]) // rebuilds the legs from the whole set
	}
	for _, g := range groups {
		e.setGroupTermsLocked(g)
	}
}

func (e *Engine) addAccountsLocked(accounts []Account) {
	for _, a := range accounts {
		e.setAccountLocked(a)
		e.accountFor(a.ID).marginCalled = a.MarginCalled
	}
}

func (e *Engine) addPositionsLocked(positions []Position) {
	for _, p := range positions {
		e.addPositionLocked(p)
	}
}

func (e *Engine) addOrdersLocked(orders []Order) {
	for _, o := range orders {
		e.addOrderLocked(o)
	}
}
