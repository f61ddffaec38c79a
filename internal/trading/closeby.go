package trading

import (
	"context"
	"database/sql"
	"errors"
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
// (sell open − buy open) × v and nothing else. Its deals keep the ledger's close keys
// (close:<position>:<volume before>); its nonce binds in fx_close_by (migration 000037). No quote of the symbol is needed — it works while
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
// makes a retry answer the original: the close-by's row in fx_close_by, unique per account and
// nonce, is written in its transaction, so a second execution cannot commit; the nonce used for
// another pair is EKEYREUSED.
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
		// A retry whose original committed while it was planned — in the same batch, it failed on
		// the nonce's key, or found the pair it closed: answered with the original.
		if res, ok, err := s.closeByReplay(ctx, userID, id, oppositeID, nonce); ok || err != nil {
			return res, err
		}
	}
	if w.Err != nil {
		return CloseByResult{}, w.Err
	}
	return w.res, nil
}

// closeByReplay answers a close-by whose nonce the account has used: the original, or
// EKEYREUSED when it closed another pair. ok is false when the nonce has not been used.
func (s *Service) closeByReplay(ctx context.Context, userID, id, oppositeID int64, nonce string) (CloseByResult, bool, error) {
	p, err := book.LoadPosition(ctx, s.db, userID, id)
	if err != nil {
		return CloseByResult{}, false, err
	}
	var pos, opp int64
	err = s.db.QueryRowContext(ctx, "SELECT `positionId`, `oppositeId` FROM `fx_close_by` WHERE `accountId` = ? AND `requestNonce` = ?", p.AccountID, nonce).Scan(&pos, &opp)
	if errors.Is(err, sql.ErrNoRows) {
		return CloseByResult{}, false, nil
	}
	if err != nil {
		return CloseByResult{}, false, fmt.Errorf("close by %d: nonce %q: %w", id, nonce, err)
	}
	if pos != id || opp != oppositeID {
		return CloseByResult{}, true, fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d to close position %d by %d; nothing was done. "+
			"Send a new close-by with a new requestNonce; resending the original request unchanged replays it.", nonce, p.AccountID, pos, opp)
	}
	q, err := book.LoadPosition(ctx, s.db, userID, oppositeID)
	if err != nil {
		return CloseByResult{}, true, err
	}
	deals, err := store.QueryAll(ctx, s.db, "close-by deals", book.ScanDeal, "SELECT "+book.DealCols+" FROM `fx_deal` d WHERE d.`accountId` = ? AND d.`positionId` IN (?, ?) AND d.`comment` = ? ORDER BY d.`id`",
		p.AccountID, id, oppositeID, closeByComment)
	if err != nil {
		return CloseByResult{}, true, err
	}
	return CloseByResult{Position: p, Opposite: q, Deals: deals, Replayed: true}, true, nil
}

// closeByComment is the comment of a close-by's deals (closeLeg's, for reason CLOSE_BY).
var closeByComment = "close " + strings.ToLower(string(fx.CloseBy))

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
	keys := [2]string{"close:" + itoa(p.ID) + ":" + p.Volume.String(), "close:" + itoa(q.ID) + ":" + q.Volume.String()}
	if w.nonce != "" {
		r.Writes.Exec("INSERT INTO `fx_close_by` (`accountId`, `requestNonce`, `positionId`, `oppositeId`, `createdAt`) VALUES (?, ?, ?, ?, NOW(3))", a.ID, w.nonce, p.ID, q.ID)
	}
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
