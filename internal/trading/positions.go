package trading

import (
	"context"
	"fmt"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
)

// Positions lists userID's positions, newest first.
func (s *Service) Positions(ctx context.Context, userID, accountID int64, status string, limit int) ([]Position, error) {
	return listPositions(ctx, s.db, userID, accountID, status, clampLimit(limit))
}

// StopChange is one of SL or TP in a modify: Set false leaves it alone, Set with a nil Value
// removes it.
type StopChange struct {
	Set   bool
	Value *decimal.Decimal
}

// ModifyPosition sets or removes SL and TP of userID's open position id, checked against this
// process's current price.
func (s *Service) ModifyPosition(ctx context.Context, userID, id int64, sl, tp StopChange) (Position, error) {
	if !sl.Set && !tp.Set {
		return Position{}, fx.Errorf(fx.EINVALID, "Nothing to change: send sl, tp or both (an empty string removes one).")
	}
	p, err := loadPosition(ctx, s.db, userID, id)
	if err != nil {
		return Position{}, err
	}
	if p.Status != fx.PositionOpen {
		return Position{}, fx.Errorf(fx.ECONFLICT, "Position %d is closed.", id)
	}
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return Position{}, err
	}
	in, ok := cat.instruments[p.Symbol]
	if !ok {
		return Position{}, fmt.Errorf("position %d: instrument %s is missing", id, p.Symbol)
	}
	q, ok := newMarket(s.prices, cat).quote(p.Symbol)
	if !ok {
		return Position{}, errPricing()
	}
	newSL, newTP := p.SL, p.TP
	if sl.Set {
		newSL = sl.Value
	}
	if tp.Set {
		newTP = tp.Value
	}
	ref := q.bid
	if p.Side == fx.Sell {
		ref = q.ask
	}
	// Only the stops being changed are checked against the market; one left alone may already
	// be on the wrong side, about to trigger, and must not block moving the other.
	var chkSL, chkTP *decimal.Decimal
	if sl.Set {
		chkSL = newSL
	}
	if tp.Set {
		chkTP = newTP
	}
	if err := checkStops(in, p.Side, ref, chkSL, chkTP); err != nil {
		return Position{}, err
	}
	res, err := s.db.ExecContext(ctx, "UPDATE `fx_position` SET `sl` = ?, `tp` = ? WHERE `id` = ? AND `status` = 'OPEN'", newSL, newTP, id)
	if err != nil {
		return Position{}, fmt.Errorf("modify position %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Position{}, fx.Errorf(fx.ECONFLICT, "Position %d is closed.", id)
	}
	s.notify(ctx, risk.Change{Kind: risk.PositionModified, Position: risk.Position{ID: id, SL: floatOf(newSL), TP: floatOf(newTP)}})
	return loadPosition(ctx, s.db, userID, id)
}

// CloseResult is a (partial) close: the position after it and the profit deal.
type CloseResult struct {
	Position Position
	Deal     Deal
}

// ClosePosition closes volume lots (nil: all) of userID's position id at this process's price,
// in one fenced transaction holding the position row: of racing closes, one wins and the rest
// answer ECONFLICT.
func (s *Service) ClosePosition(ctx context.Context, userID, id int64, volume *decimal.Decimal, reason fx.CloseReason) (CloseResult, error) {
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return CloseResult{}, err
	}
	// Round trip one: lock the account, then the position. The account is found through
	// the position (a non-locking read: a position never changes account), so every close takes
	// the account row first as every fill does, without a read of its own before the
	// transaction.
	tx, locks, err := s.begin(ctx, gate.Close, "close position")
	if err != nil {
		return CloseResult{}, err
	}
	defer tx.Rollback()
	var a Account
	var p Position
	var found, exists bool
	locks.query(rowInto(&a, &found, scanAccount), "SELECT "+accountCols+" FROM `fx_account` WHERE `id` = (SELECT `accountId` FROM `fx_position` WHERE `id` = ?) FOR UPDATE", id)
	locks.query(rowInto(&p, &exists, scanPosition), lockPositionSQL, id)
	if err := tx.lock(ctx, locks, "close position"); err != nil {
		return CloseResult{}, err
	}
	if !exists || ownedBy(a, found, userID, p.AccountID) != nil {
		return CloseResult{}, fx.Errorf(fx.ENOTFOUND, "Position %d not found.", id)
	}
	if p.Status != fx.PositionOpen {
		return CloseResult{}, errAlreadyClosed(id)
	}
	in, ok := cat.instruments[p.Symbol]
	if !ok {
		return CloseResult{}, fmt.Errorf("position %d: instrument %s is missing", id, p.Symbol)
	}
	if in.Status == fx.InstrumentHalted {
		return CloseResult{}, errHalted(in.Symbol)
	}
	if volume != nil {
		if err := checkVolume(in, *volume); err != nil {
			return CloseResult{}, err
		}
	}
	m := newMarket(s.prices, cat)
	q, err := m.tradable(p.Symbol)
	if err != nil {
		return CloseResult{}, err
	}
	price := closePrice(in, q, p.Side)
	vol := p.Volume
	if volume != nil {
		vol = *volume
		if vol.GreaterThan(p.Volume) {
			return CloseResult{}, fx.Errorf(fx.ECONFLICT, "Position %d has %s lots open; cannot close %s.", id, p.Volume, vol)
		}
		if rest := p.Volume.Sub(vol); rest.IsPositive() && rest.LessThan(in.VolumeMin) {
			return CloseResult{}, fx.Errorf(fx.EINVALID, "Closing %s lots would leave %s, below %s's minimum of %s; close all or less.", vol, rest, in.Symbol, in.VolumeMin)
		}
	}
	profit, ok := m.convert(profitQuote(in, p.Side, vol, vol.Mul(p.OpenPrice), price), in.Quote, a.Currency)
	if !ok {
		return CloseResult{}, errPricing()
	}
	volumeBefore := p.Volume
	p.Volume = p.Volume.Sub(vol)
	p.RealizedProfit = p.RealizedProfit.Add(profit)
	// Round trip two: the position, the balance and the profit deal. The account's stored
	// equity and used margin are left to the next mark (reconcile, or this account's next fill):
	// summing its exposures here would cost every close a scan of the account's positions.
	var b batch
	if p.Volume.IsZero() {
		now := s.now().UTC()
		// closePrice is the price that closed the position; a partial close's price is on its deal.
		recorded := string(reason)
		p.Status, p.ClosedAt, p.CloseReason, p.ClosePrice = fx.PositionClosed, &now, &recorded, &price
		b.exec("UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ?, `closePrice` = ?, `status` = 'CLOSED', "+
			"`closeReason` = ?, `closedAt` = NOW(3) WHERE `id` = ?", p.Volume, p.RealizedProfit, price, reason, id)
	} else {
		b.exec("UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ? WHERE `id` = ?",
			p.Volume, p.RealizedProfit, id)
	}
	side, sym := p.Side, p.Symbol
	d, err := commitDeal(ctx, tx, &b, &a, Deal{Type: fx.DealProfit, Amount: profit, OrderID: &p.OrderID, PositionID: &p.ID, Symbol: &sym,
		Side: &side, Volume: &vol, Price: &price, IdempotencyKey: "close:" + itoa(p.ID) + ":" + volumeBefore.String(), Comment: "close " + strings.ToLower(string(reason))}, nil)
	if err != nil {
		return CloseResult{}, fmt.Errorf("close position %d: %w", id, err)
	}
	if p.Status == fx.PositionClosed {
		s.notify(ctx, risk.Change{Kind: risk.PositionClosed, Position: risk.Position{ID: id}}, balanceChanged(a))
	} else {
		s.notify(ctx, risk.Change{Kind: risk.PositionReduced, Position: risk.Position{ID: id, Volume: p.Volume.InexactFloat64()}}, balanceChanged(a))
	}
	return CloseResult{Position: p, Deal: d}, nil
}
