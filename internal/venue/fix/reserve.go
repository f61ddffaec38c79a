package fix

import (
	"log/slog"
	"strconv"
)

// Reserved closes (docs/fix.md, «Reserved closes»): the whole close of a trade with a stop or a
// take-profit is named before its trigger can fire — an fx_fix_order row <trade>.c<n>, RESERVED,
// "close trade T, whole" — committed off the burst's path with the identities decided with it
// (identity.go). At the trigger the holder sends that ClOrdID at once with the units open then;
// the row's state follows from its report (intake.go), as any order's does. Sent twice (an old
// holder, then a new one), the same ClOrdID is refused by the venue as a duplicate order: the
// earlier send is the close (api.go, earlierSend).

// ReserveClose names the whole close of desk trade tradeID (its public id) ahead of its trigger:
// trading calls it when an EXTERNAL position gets a stop or a take-profit (at open, once the
// trade exists, and at modify). It returns at once; the row is committed in the background. A
// trade with a reservation keeps it (it means "close whole", whatever the level); one with a
// close in flight is reserved again when that close ends and the trade is still open.
func (s *Session) ReserveClose(tradeID string) {
	o, ok := s.trades.reserve(tradeID)
	if !ok {
		return
	}
	go s.writeReservation(o)
}

// writeReservation commits reservation o with the identities decided with it and makes it
// usable. A reservation whose commit failed is never sent: the close is then decided as any
// other, with its identity committed before the send.
func (s *Session) writeReservation(o order) {
	err := s.identities.commit(o)
	if err != nil {
		s.log.Warn("FIX: could not reserve a trade's close; it is committed at its trigger instead", slog.String("clOrdId", o.ClOrdID), slog.Any("err", err))
	}
	s.trades.reservationWritten(o.TradeID, o.ClOrdID, err == nil)
}

// renewReservation reserves trade key's whole close again after a close of it ended, if it has a
// stop or a take-profit and is still open.
func (s *Session) renewReservation(key string) {
	o, ok := s.trades.reserveKey(key)
	if !ok {
		return
	}
	go s.writeReservation(o)
}

// reserve decides the reservation of the trade whose public id is id (reserveKey).
func (lt *liveTrades) reserve(id string) (order, bool) {
	n, _ := strconv.ParseInt(id, 10, 64)
	lt.mu.Lock()
	key := lt.byID[n]
	if t := lt.byKey[key]; t != nil && lt.loaded {
		t.wantsReserve = true
	}
	lt.mu.Unlock()
	if key == "" {
		return order{}, false
	}
	return lt.reserveKey(key)
}

// reserveKey decides trade key's reservation: the next close number, claimed now so that no
// other close takes it, usable once its row committed (reservationWritten).
func (lt *liveTrades) reserveKey(key string) (order, bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	t := lt.byKey[key]
	if !lt.loaded || t == nil || !t.wantsReserve || t.units.IsZero() || t.reserved != "" || t.pending != "" {
		return order{}, false
	}
	side := sideSell
	if t.units.IsNegative() {
		side = sideBuy
	}
	t.closes++
	o := order{ClOrdID: t.key + closeMark + strconv.Itoa(t.closes), TradeID: t.key, Symbol: t.symbol, Side: side, Qty: t.units.Abs(), Status: stateReserved}
	t.reserved, t.ready, t.inherited = o.ClOrdID, false, false
	return o, true
}

// reservationWritten makes reservation clOrdID of trade key usable, or forgets it when its row
// was not written (its number is not used again: the row may still have committed).
func (lt *liveTrades) reservationWritten(key, clOrdID string, ok bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	t := lt.byKey[key]
	if t == nil || t.reserved != clOrdID {
		return
	}
	if ok {
		t.ready = true
	} else {
		t.reserved = ""
	}
}

// reservationUnsent records that the venue does not know trade key's inherited reservation: no
// earlier holder sent it, and this one is the only sender now.
func (lt *liveTrades) reservationUnsent(key, clOrdID string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if t := lt.byKey[key]; t != nil && t.reserved == clOrdID {
		t.inherited = false
	}
}

// unresolvedReservations is what resolveReserved asks the venue about: every usable
// reservation loaded from the journal and not asked about yet (an earlier holder may have sent
// it), and every pending close nobody waits for (sent, its outcome unknown; only those whose row
// is still RESERVED are asked about).
func (lt *liveTrades) unresolvedReservations(waited func(string) bool) (inherited, sent []order) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for _, t := range lt.byKey {
		side := sideSell
		if t.units.IsNegative() {
			side = sideBuy
		}
		switch {
		case t.pending != "" && !waited(t.pending):
			sent = append(sent, order{ClOrdID: t.pending, TradeID: t.key, Symbol: t.symbol, Side: side})
		case t.pending == "" && t.reserved != "" && t.inherited && t.ready:
			inherited = append(inherited, order{ClOrdID: t.reserved, TradeID: t.key, Symbol: t.symbol, Side: side})
		}
	}
	return inherited, sent
}

// ReserveClose names trade tradeID's whole close ahead of its trigger (Session.ReserveClose).
func (x Sender) ReserveClose(tradeID string) { x.S.ReserveClose(tradeID) }

// reservationsPending is how many reservations are being written (tests wait for none).
func (lt *liveTrades) reservationsPending() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	n := 0
	for _, t := range lt.byKey {
		if t.reserved != "" && !t.ready {
			n++
		}
	}
	return n
}
