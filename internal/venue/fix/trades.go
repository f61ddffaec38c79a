package fix

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/shopspring/decimal"

	"fxdesk/internal/store"
)

// The holder's trades in memory: what a close needs to be decided — the trade's symbol, side
// and open units, how many closes it has had and which one is still in flight — without reading
// the journal between the trigger and the write (docs/fix.md, «The burst on one session»). The
// journal stays the durable copy: the state is loaded from it when the session starts on the
// holder (Session.Run) and kept current by the code that writes the journal — the identity
// rows (identities), the reports (intake), endUnsent and deleteOrder — all in this process,
// the only one writing the journal while it holds the lease.
//
// Only trades that can still be closed are kept: those with open units or a close without a
// final report; a trade that closes is forgotten. A trade the state does not know is closed
// (TRADE_DOESNT_EXIST), as it is in the journal; one that a report reduces anyway (a case the
// desk's own orders do not make) is read from the journal again.

// liveTrade is one desk trade as the holder keeps it.
type liveTrade struct {
	key    string // its opening ClOrdID
	id     int64  // its public id: its first opening execution (0 until it executed)
	symbol string
	units  decimal.Decimal // open units, signed (a buy is positive)
	closes int             // its close orders in the journal: the last one's number
	// pending is its close without a final report ("" when none): while it is, no other close of
	// the trade goes (CLOSE_IN_FLIGHT).
	pending string
	// reserved is its whole close's identity written ahead (RESERVED, reserve.go; "" when none);
	// ready once its row committed: only then may it be sent without a commit. inherited: loaded
	// from the journal, so an earlier holder may have sent it already.
	reserved         string
	ready, inherited bool
	wantsReserve     bool // it has a stop or a take-profit: a reservation used is renewed
}

// liveTrades is the holder's trades, by key and by public id.
type liveTrades struct {
	mu     sync.Mutex
	loaded bool // the state is current: Session.Run loaded it and runs
	byKey  map[string]*liveTrade
	byID   map[int64]string
}

func newLiveTrades() *liveTrades {
	return &liveTrades{byKey: map[string]*liveTrade{}, byID: map[int64]string{}}
}

// closeClaim is a close decided on the state: the order to send (its identity claimed as the
// trade's pending close), or an earlier close nobody waits for, to ask the venue about first.
type closeClaim struct {
	order order
	ask   order // ClOrdID set: the trade's pending close, which nobody waits for
	// askReserved: ask is the trade's inherited reservation, which an earlier holder may have
	// sent; a close under another number waits until the venue says whether it did.
	askReserved bool
}

// claimClose decides a close of units (nil: all) of the trade whose public id is id: the
// opposite order for those units, its ClOrdID <key>.c<n> (n its closes so far plus one), claimed
// as the trade's pending close. waited tells whether someone waits for a ClOrdID; register
// starts waiting for the claimed one, under the state's lock, so that no other close or status
// request ever sees it pending with nobody waiting. retried is true once an earlier close's
// outcome was just asked: a close still pending then is in flight.
func (lt *liveTrades) claimClose(id string, units *decimal.Decimal, waited func(string) bool, register func(string), retried bool) (closeClaim, error) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if !lt.loaded {
		return closeClaim{}, errNotLoaded
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	t := lt.byKey[lt.byID[n]]
	if n <= 0 || t == nil || t.units.IsZero() {
		return closeClaim{}, tradeNotFound(id)
	}
	qty := t.units.Abs()
	if units != nil {
		if !units.IsPositive() || units.GreaterThan(qty) {
			return closeClaim{}, closeUnitsInvalid(id, *units, qty)
		}
		qty = *units
	}
	side := sideSell
	if t.units.IsNegative() {
		side = sideBuy
	}
	// One close of a trade at a time: a netting venue executes every close it is sent (it has
	// no trade to find already closed, as a REST venue does), so a second close of the same
	// trade would flip it.
	if t.pending != "" {
		if retried || waited(t.pending) {
			return closeClaim{}, closeInFlight(id, t.pending)
		}
		return closeClaim{ask: order{ClOrdID: t.pending, TradeID: t.key, Symbol: t.symbol, Side: side}}, nil
	}
	if t.reserved != "" && t.ready {
		if units == nil || qty.Equal(t.units.Abs()) {
			// The whole close, named ahead: sent at once with the units open now, its row's state
			// written by the intake when its report comes (docs/fix.md, «Reserved closes»).
			o := order{ClOrdID: t.reserved, TradeID: t.key, Symbol: t.symbol, Side: side, Qty: qty, Status: stateReserved}
			t.pending, t.reserved, t.ready, t.inherited = t.reserved, "", false, false
			register(o.ClOrdID)
			return closeClaim{order: o}, nil
		}
		if t.inherited && !retried {
			// A part under a new number: an earlier holder may have sent the reservation, and a
			// netting venue would execute both.
			return closeClaim{ask: order{ClOrdID: t.reserved, TradeID: t.key, Symbol: t.symbol, Side: side}, askReserved: true}, nil
		}
	}
	t.closes++
	o := order{ClOrdID: t.key + closeMark + strconv.Itoa(t.closes), TradeID: t.key, Symbol: t.symbol, Side: side, Qty: qty}
	t.pending = o.ClOrdID
	register(o.ClOrdID)
	return closeClaim{order: o}, nil
}

// unclaim gives back a close whose identity row is provably not in the journal (its insert
// refused, or deleted after the session refused the send): the trade may be closed again with
// the same number.
func (lt *liveTrades) unclaim(o order) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if t := lt.byKey[o.TradeID]; t != nil && o.Status == stateReserved && t.pending == o.ClOrdID {
		// A reservation the session refused to send: reserved again.
		t.pending, t.reserved, t.ready = "", o.ClOrdID, true
		return
	}
	if t := lt.byKey[o.TradeID]; t != nil && t.pending == o.ClOrdID && t.key+closeMark+strconv.Itoa(t.closes) == o.ClOrdID {
		t.pending = ""
		t.closes--
	}
}

// ended records that close clOrdID has a final state (a final report, or the venue never saw
// it): it no longer holds its trade's closes back.
func (lt *liveTrades) ended(trade, clOrdID string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if t := lt.byKey[trade]; t != nil && t.pending == clOrdID {
		t.pending = ""
	}
}

// applied updates the state with what the journal recorded from one report (journal.applyTx),
// after its transaction committed. It answers the trade keys it does not know that the report
// allocated units to, for the caller to load from the journal (loadKeys).
func (lt *liveTrades) applied(r report, a applied) (unknown []string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if !lt.loaded {
		return nil
	}
	key := a.trade // the journal's: "" for the venue's own order (journal.go, «Whose execution»)
	var touched []*liveTrade
	if key != "" && key != r.ClOrdID {
		// A close: counted when the report wrote its row, in flight until its final state.
		if t := lt.byKey[key]; t != nil {
			touched = append(touched, t)
			if a.inserted {
				t.closes = max(t.closes+1, closeNumber(key, r.ClOrdID))
			}
			switch {
			case a.final && t.pending == r.ClOrdID:
				t.pending = "" // a fill journaled before this report came is relearned (resentFill)
			case !a.final && t.pending == "":
				t.pending = r.ClOrdID
			}
		} else if a.inserted || len(a.shares) > 0 {
			unknown = append(unknown, key)
		}
	}
	for _, sh := range a.shares {
		if sh.trade == "" {
			continue
		}
		t := lt.byKey[sh.trade]
		switch {
		case t != nil:
			t.units = t.units.Add(sh.units)
		case sh.trade == r.ClOrdID:
			// A new trade's first execution.
			t = &liveTrade{key: sh.trade, symbol: r.Symbol, units: sh.units}
			lt.byKey[sh.trade] = t
		default:
			unknown = append(unknown, sh.trade)
			continue
		}
		if t.id == 0 && sh.trade == r.ClOrdID && a.execID > 0 {
			t.id = a.execID
			lt.byID[a.execID] = t.key
		}
		touched = append(touched, t)
	}
	for _, t := range touched {
		if !live(t) {
			// Closed: forgotten, as a holder starting now would not load it.
			delete(lt.byKey, t.key)
			delete(lt.byID, t.id)
		}
	}
	return unknown
}

// closeNumber is n in close clOrdID <key>.c<n> (0 when it has none): a trade's next close is
// numbered past every close the journal holds, also when one in between was never written.
func closeNumber(key, clOrdID string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(clOrdID, key+closeMark))
	return n
}

// live is whether the holder keeps t: it has open units or a close in flight.
func live(t *liveTrade) bool { return !t.units.IsZero() || t.pending != "" }

// set replaces the state of the trades in ts (the journal's, read by loadTrades); all marks the
// whole state loaded from the journal. A trade read again keeps what this process claimed and
// the journal may not hold yet: its next close keeps the number memory would give it, when
// higher (a number claimed and never written is not used twice), and a close claimed past every
// close the journal holds (its identity row on its way) stays its pending close.
func (lt *liveTrades) set(ts []*liveTrade, all bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if all {
		lt.byKey, lt.byID = map[string]*liveTrade{}, map[int64]string{}
		lt.loaded = true
	}
	for _, t := range ts {
		if old := lt.byKey[t.key]; old != nil {
			switch {
			case old.pending != "" && t.pending == "" && t.reserved == old.pending:
				// A reservation this process sent: its row says RESERVED until its report is
				// journaled, and it is the trade's close in flight, never to be sent again.
				t.pending, t.reserved, t.ready, t.inherited = old.pending, "", false, false
			case old.pending != "" && t.pending == "" && closeNumber(t.key, old.pending) > t.closes:
				t.pending = old.pending
			}
			if old.reserved != "" && t.reserved == "" && closeNumber(t.key, old.reserved) > t.closes {
				// This process's reservation, whose commit the journal does not show yet.
				t.reserved, t.ready, t.inherited = old.reserved, old.ready, old.inherited
			} else if t.reserved != "" && t.reserved == old.reserved {
				t.inherited, t.ready = old.inherited, t.ready || old.ready // this holder's own was never sent
			}
			t.wantsReserve = t.wantsReserve || old.wantsReserve
			t.closes = max(t.closes, old.closes)
			delete(lt.byKey, t.key)
			delete(lt.byID, old.id)
		}
		if !live(t) {
			continue
		}
		lt.byKey[t.key] = t
		if t.id != 0 {
			lt.byID[t.id] = t.key
		}
	}
}

// unload marks the state no longer current: the session stopped, another holder may write the
// journal.
func (lt *liveTrades) unload() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.loaded = false
	lt.byKey, lt.byID = map[string]*liveTrade{}, map[int64]string{}
}

// snapshot is a copy of every trade the state holds, by key (tests compare it with the
// journal's).
func (lt *liveTrades) snapshot() map[string]liveTrade {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	out := make(map[string]liveTrade, len(lt.byKey))
	for k, t := range lt.byKey {
		out[k] = *t
	}
	return out
}

// loadChunk bounds the keys one load statement names.
const loadChunk = 500

// liveKeys is the key of every trade the holder keeps: those with open units, and those with an
// order (opening or closing) without a final report.
func (j *journal) liveKeys(ctx context.Context) ([]string, error) {
	scan := func(sc store.Scanner) (string, error) {
		var k string
		err := sc.Scan(&k)
		return k, err
	}
	open, err := store.QueryAll(ctx, j.db, "journal open trades", scan,
		"SELECT `tradeId` FROM `fx_fix_allocation` WHERE `tradeId` <> '' GROUP BY `tradeId` HAVING SUM(`units`) <> 0")
	if err != nil {
		return nil, err
	}
	busy, err := store.QueryAll(ctx, j.db, "journal trades with orders in flight", scan,
		"SELECT DISTINCT `tradeId` FROM `fx_fix_order` WHERE `tradeId` <> '' AND `status` IN (?, ?)", stateSending, stateNew)
	if err != nil {
		return nil, err
	}
	return append(open, busy...), nil
}

// loadTrades reads trades keys from the journal as the holder keeps them.
func (j *journal) loadTrades(ctx context.Context, keys []string) ([]*liveTrade, error) {
	type units struct {
		key, symbol string
		units       decimal.Decimal
		id          int64
	}
	type orderRow struct{ key, clOrdID, symbol, status string }
	by := map[string]*liveTrade{}
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), loadChunk)]
		keys = keys[len(chunk):]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
			by[k] = &liveTrade{key: k}
		}
		in := store.Placeholders(len(chunk))
		allocated, err := store.QueryAll(ctx, j.db, "journal load trades", func(sc store.Scanner) (u units, err error) {
			err = sc.Scan(&u.key, &u.symbol, &u.units, &u.id)
			return u, err
		}, "SELECT a.`tradeId`, e.`symbol`, SUM(a.`units`), COALESCE(MIN(CASE WHEN e.`clOrdId` = a.`tradeId` THEN e.`id` END), 0) "+
			"FROM `fx_fix_allocation` a JOIN `fx_fix_execution` e ON e.`id` = a.`executionId` WHERE a.`tradeId` IN ("+in+") GROUP BY a.`tradeId`, e.`symbol`", args...)
		if err != nil {
			return nil, err
		}
		for _, u := range allocated {
			t := by[u.key]
			t.symbol, t.units, t.id = u.symbol, t.units.Add(u.units), u.id
		}
		orders, err := store.QueryAll(ctx, j.db, "journal load trades' orders", func(sc store.Scanner) (c orderRow, err error) {
			err = sc.Scan(&c.key, &c.clOrdID, &c.symbol, &c.status)
			return c, err
		}, "SELECT `tradeId`, `clOrdId`, `symbol`, `status` FROM `fx_fix_order` WHERE `tradeId` IN ("+in+") ORDER BY `sentAt`, `clOrdId`", args...)
		if err != nil {
			return nil, err
		}
		for _, c := range orders {
			t := by[c.key]
			if t.symbol == "" {
				t.symbol = c.symbol
			}
			if !strings.HasPrefix(c.clOrdID, c.key+closeMark) {
				continue // the trade's opening order
			}
			t.closes = max(t.closes+1, closeNumber(c.key, c.clOrdID))
			switch c.status {
			case stateSending, stateNew:
				t.pending = c.clOrdID
			case stateReserved:
				// The newest: an older one is a reservation whose commit this holder's
				// predecessor could not confirm, and never sent.
				if closeNumber(c.key, c.clOrdID) > closeNumber(c.key, t.reserved) {
					t.reserved, t.ready, t.inherited, t.wantsReserve = c.clOrdID, true, true, true
				}
			}
		}
	}
	out := make([]*liveTrade, 0, len(by))
	for _, t := range by {
		out = append(out, t)
	}
	return out, nil
}

// reloadTrade reads trade key from the journal again, replacing what memory holds of it (a
// trade the journal has closed is forgotten; set keeps what this process claimed).
func (s *Session) reloadTrade(ctx context.Context, key string) error {
	s.relearning.Lock()
	defer s.relearning.Unlock()
	ts, err := s.journal.loadTrades(ctx, []string{key})
	if err != nil {
		return err
	}
	s.trades.set(ts, false)
	return nil
}

// resentFill is whether report r carried executions the journal already held (a) — a report
// resent after a journal commit whose reply was lost, a status answer, or one another process
// journaled first. Memory never took those executions from this report (applied adds only what
// the journal recorded new), and may never have taken them at all: the trades they were
// allocated to are read from the journal again (relearn).
func resentFill(r report, a applied) bool {
	return a.execID == 0 && r.CumQty.IsPositive()
}

// relearn reads from the journal the trades keys and those the executions of orders resent were
// allocated to, and replaces what memory holds of them. The intake runs it holding relearning,
// after the reports' commit, so no report of theirs is applied in between. A
// trade it cannot read stays as memory has it; a close of it the memory does not know open
// still asks the journal (closeTrade).
func (s *Session) relearn(ctx context.Context, keys, resent []string) {
	if len(resent) > 0 {
		more, err := s.journal.tradesOf(ctx, resent)
		if err != nil {
			s.log.Warn("FIX: could not read which trades resent reports touched; a close of them reads the journal first", slog.Any("orders", resent), slog.Any("err", err))
		}
		keys = append(keys, more...)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		return
	}
	ts, err := s.journal.loadTrades(ctx, keys)
	if err != nil {
		s.log.Warn("FIX: could not read trades from the journal; a close of them reads the journal first", slog.Any("trades", keys), slog.Any("err", err))
		return
	}
	s.trades.set(ts, false)
}

// tradesOf is every desk trade the executions of orders clOrdIDs were allocated to.
func (j *journal) tradesOf(ctx context.Context, clOrdIDs []string) ([]string, error) {
	var out []string
	for len(clOrdIDs) > 0 {
		chunk := clOrdIDs[:min(len(clOrdIDs), loadChunk)]
		clOrdIDs = clOrdIDs[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		keys, err := store.QueryAll(ctx, j.db, "journal trades of orders", func(sc store.Scanner) (k string, err error) {
			err = sc.Scan(&k)
			return k, err
		}, "SELECT DISTINCT a.`tradeId` FROM `fx_fix_allocation` a JOIN `fx_fix_execution` e ON e.`id` = a.`executionId` "+
			"WHERE e.`clOrdId` IN ("+store.Placeholders(len(chunk))+") AND a.`tradeId` <> ''", args...)
		if err != nil {
			return nil, err
		}
		out = append(out, keys...)
	}
	return out, nil
}

// loadLive loads the whole state from the journal (the session starting on the holder).
func (s *Session) loadLive(ctx context.Context) error {
	keys, err := s.journal.liveKeys(ctx)
	if err != nil {
		return err
	}
	ts, err := s.journal.loadTrades(ctx, keys)
	if err != nil {
		return err
	}
	s.trades.set(ts, true)
	return nil
}
