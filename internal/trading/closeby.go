package trading

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// Close-by (docs/orders.md, «Close-by»; MT5's TRADE_ACTION_CLOSE_BY): two opposite positions of
// one HEDGING account on one symbol closed against each other, with no spread paid. v = the
// smaller volume; the position named in the path closes v at the opposite's open price, and the
// opposite closes v at its own open price (no profit), so the pair realises
// (sell open − buy open) × v and nothing else. No quote of the symbol is needed — it works while
// its market is closed — but the profit's conversion into the account's currency needs that
// conversion's price when the symbol is not quoted in it.

// CloseByResult is a close-by: both positions after it and their two deals (the named
// position's first). Replayed is true when its requestNonce had been seen and nothing new
// happened.
type CloseByResult struct {
	Position, Opposite book.Position
	Deals              []book.Deal
	Replayed           bool
}

// CloseBy closes userID's position id against its opposite position oppositeID. A requestNonce
// makes a retry answer the original: the close-by's two deals carry it in their idempotency keys
// (closeByKey), and a close-by always closes the smaller of its pair whole, so the same pair can
// never be closed by it twice — a retry finds its deals (or, planned before they committed, its
// pair closed) and is answered with them. The nonce used for another pair is EKEYREUSED.
func (s *Service) CloseBy(ctx context.Context, userID, id, oppositeID int64, nonce string) (CloseByResult, error) {
	if id == oppositeID {
		return CloseByResult{}, fx.Errorf(fx.EINVALID, "oppositeId must name another position than %d.", id)
	}
	if nonce != "" {
		if res, ok, err := s.closeByReplay(ctx, userID, id, oppositeID, nonce); ok || err != nil {
			return res, err
		}
	}
	if err := s.admit(ctx, gate.Close, "close by", slog.Int64("position_id", id), slog.Int64("opposite_id", oppositeID)); err != nil {
		return CloseByResult{}, err
	}
	w := &closeByWrite{s: s, Queued: book.NewQueued(ctx, gate.Close, "close by", 0, slog.Int64("position_id", id), slog.Int64("opposite_id", oppositeID)),
		userID: userID, id: id, opp: oppositeID, nonce: nonce}
	s.commits.Submit(w)
	if w.Err != nil && nonce != "" && fx.ErrorCode(w.Err) != fx.EUNAVAILABLE && fx.ErrorCode(w.Err) != fx.EUNKNOWN {
		// A retry whose original committed while it was planned: it found the pair closed.
		if res, ok, err := s.closeByReplay(ctx, userID, id, oppositeID, nonce); ok || err != nil {
			return res, err
		}
	}
	if w.Err != nil {
		return CloseByResult{}, w.Err
	}
	return w.res, nil
}

// closeByKey is the idempotency key of a close-by's deal closing position id from volume
// before: a close's key (close:<position>:<volume before>, which the ledger's readers parse)
// with the nonce in it, close:<position>:by:<nonce>:<volume before>.
func closeByKey(id int64, nonce string, before decimal.Decimal) string {
	if nonce == "" {
		return "close:" + itoa(id) + ":" + before.String()
	}
	return "close:" + itoa(id) + ":by:" + nonce + ":" + before.String()
}

// likeEscaper escapes a nonce for a LIKE pattern with ESCAPE '!'.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// closeByReplay answers a close-by whose nonce the account has used: the original, or
// EKEYREUSED when it closed another pair. ok is false when the nonce has not been used.
func (s *Service) closeByReplay(ctx context.Context, userID, id, oppositeID int64, nonce string) (CloseByResult, bool, error) {
	p, err := book.LoadPosition(ctx, s.db, userID, id)
	if err != nil {
		return CloseByResult{}, false, err
	}
	found, err := store.QueryAll(ctx, s.db, "close-by deals", book.ScanDeal, "SELECT "+book.DealCols+" FROM `fx_deal` d WHERE d.`accountId` = ? AND d.`idempotencyKey` LIKE ? ESCAPE '!' ORDER BY d.`id`",
		p.AccountID, "close:%:by:"+likeEscaper.Replace(nonce)+":%")
	if err != nil {
		return CloseByResult{}, false, fmt.Errorf("close by %d: nonce %q: %w", id, nonce, err)
	}
	var deals []book.Deal
	for _, d := range found {
		// The pattern's % may span colons of another nonce: keep the keys of exactly this one.
		if d.PositionID != nil && d.IdempotencyKey == closeByKey(*d.PositionID, nonce, keyVolume(d.IdempotencyKey)) {
			deals = append(deals, d)
		}
	}
	if len(deals) == 0 {
		return CloseByResult{}, false, nil
	}
	if len(deals) != 2 || *deals[0].PositionID != id || *deals[1].PositionID != oppositeID {
		return CloseByResult{}, true, fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d for another close-by (position %d); nothing was done. "+
			"Send a new close-by with a new requestNonce; resending the original request unchanged replays it.", nonce, p.AccountID, *deals[0].PositionID)
	}
	q, err := book.LoadPosition(ctx, s.db, userID, oppositeID)
	if err != nil {
		return CloseByResult{}, true, err
	}
	return CloseByResult{Position: p, Opposite: q, Deals: deals, Replayed: true}, true, nil
}

// keyVolume is the volume before a close, the last part of its deal's key.
func keyVolume(key string) decimal.Decimal {
	v, _ := decimal.NewFromString(key[strings.LastIndexByte(key, ':')+1:])
	return v
}

// closeByWrite is one close-by waiting for its group commit: both positions locked in its batch,
// their account before them.
type closeByWrite struct {
	book.Queued
	s           *Service
	userID      int64
	id, opp     int64
	nonce       string
	res         CloseByResult
	deals       [2]int
	a           book.Account
	trades      [2]routing.Profile
	pair        [2]*book.Position
	closedPair  [2]bool
	reducedPair [2]decimal.Decimal
}

func (w *closeByWrite) LockedAccount(l *book.Plan) int64 {
	if w.Account == 0 {
		return l.AccountOf[w.id]
	}
	return w.Account
}

func (w *closeByWrite) Wants(l *book.Plan) {
	l.Position(w.id, false)
	l.Position(w.opp, false)
}

func (w *closeByWrite) Apply(r *book.Rows) error {
	w.res, w.deals, w.trades, w.pair = CloseByResult{}, [2]int{-1, -1}, [2]routing.Profile{}, [2]*book.Position{}
	p, exists := r.Positions[w.id]
	a, found := r.Accounts[w.Account]
	if !exists || !found || book.OwnedBy(*a, found, w.userID, p.AccountID) != nil || a.ID != p.AccountID {
		return fx.Errorf(fx.ENOTFOUND, "Position %d not found.", w.id)
	}
	q, exists := r.Positions[w.opp]
	if !exists || q.AccountID != a.ID {
		return fx.Errorf(fx.ENOTFOUND, "Position %d not found on account %d: close-by pairs two positions of one account.", w.opp, a.ID)
	}
	for _, x := range []*book.Position{p, q} {
		if x.Status != fx.PositionOpen {
			return errAlreadyClosed(x.ID)
		}
	}
	if mode := positionModeOf(r.Catalog, a); mode != fx.Hedging {
		return fx.Errorf(fx.ECONFLICT, "Account %d is %s: close-by pairs two opposite positions of a HEDGING account, and a %s account never holds both sides of a symbol (an opposite order nets them).",
			a.ID, mode, mode)
	}
	if p.Symbol != q.Symbol || p.Side == q.Side {
		return fx.Errorf(fx.EINVALID, "Positions %d (%s %s) and %d (%s %s) are not opposite positions of one symbol: close-by pairs a BUY and a SELL of the same symbol.",
			p.ID, p.Side, p.Symbol, q.ID, q.Side, q.Symbol)
	}
	if p.VenueTradeID != nil || q.VenueTradeID != nil {
		return fx.Errorf(fx.ECONFLICT, "Positions %d and %d include one held at the execution venue: close-by is for the desk's own (B-book) positions; close each instead.", p.ID, q.ID)
	}
	if err := stateRefusal(*a, actClose); err != nil {
		return err
	}
	t, ok := termsOf(r.Catalog, a.Group, p.Symbol)
	if !ok {
		return fmt.Errorf("position %d: instrument %s is missing", w.id, p.Symbol)
	}
	if err := checkTraderClose(t); err != nil {
		return err
	}
	in := t.Instrument
	if in.Status == fx.InstrumentHalted {
		return book.ErrHalted(in.Symbol)
	}
	v := decimal.Min(p.Volume, q.Volume)
	price := q.OpenPrice // both legs close here: no spread is paid
	// Every close deal's key starts "close:" (the ledger's readers find a position's closes by it).
	keys := [2]string{closeByKey(p.ID, w.nonce, p.Volume), closeByKey(q.ID, w.nonce, q.Volume)}
	w.pair = [2]*book.Position{p, q}
	for i, x := range w.pair {
		idx, trade, err := closeLeg(r, a, in, &book.Held{Position: x}, "", v, price, fx.CloseBy, book.Deal{IdempotencyKey: keys[i]}, w.s.term())
		if err != nil {
			return err
		}
		r.Deals[idx].Markup = nil // no spread paid, none earned
		w.deals[i], w.trades[i] = idx, trade
		w.closedPair[i], w.reducedPair[i] = x.Status == fx.PositionClosed, x.Volume
	}
	w.res.Position, w.res.Opposite, w.a = *p, *q, *a
	return nil
}

func (w *closeByWrite) Committed(r *book.Rows, ids *book.IDs) []risk.Change {
	var changes []risk.Change
	for i, x := range w.pair {
		w.res.Deals = append(w.res.Deals, r.DealAt(w.deals[i], ids))
		w.s.profiles.closed(w.a.ID, w.trades[i])
		if w.closedPair[i] {
			changes = append(changes, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: x.ID}})
		} else {
			changes = append(changes, risk.Change{Kind: risk.PositionReduced, Position: risk.Position{ID: x.ID, Volume: w.reducedPair[i].InexactFloat64()}})
		}
	}
	return append(changes, balanceChanged(w.a))
}

func (w *closeByWrite) Failed(err error) error {
	if store.IsDuplicateKey(err) && w.nonce != "" {
		return book.ErrReplayed
	}
	return fmt.Errorf("close position %d by %d: %w", w.id, w.opp, err)
}
