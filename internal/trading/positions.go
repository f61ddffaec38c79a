package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// Positions lists a page of userID's positions, newest first (f.Limit clamped to maxList).
func (s *Service) Positions(ctx context.Context, userID int64, f book.ListFilter) ([]book.Position, error) {
	f.Limit = clampLimit(f.Limit)
	return book.ListPositions(ctx, s.db, userID, f)
}

// StopChange is one of SL or TP in a modify: Set false leaves it alone, Set with a nil Value
// removes it.
type StopChange struct {
	Set   bool
	Value *decimal.Decimal
}

// ModifyPosition sets or removes SL and TP of userID's open position id, checked against this
// process's current price.
func (s *Service) ModifyPosition(ctx context.Context, userID, id int64, sl, tp StopChange) (book.Position, error) {
	return s.modifyPosition(ctx, userID, id, sl, tp, TrailChange{})
}

// modifyPosition is ModifyPosition with a trailing stop (trail.go, ModifyPositionTrail).
func (s *Service) modifyPosition(ctx context.Context, userID, id int64, sl, tp StopChange, trail TrailChange) (book.Position, error) {
	if !sl.Set && !tp.Set && !trail.Set {
		return book.Position{}, fx.Errorf(fx.EINVALID, "Nothing to change: send sl, tp, trailingStop or several (an empty string or null removes one).")
	}
	p, err := book.LoadPosition(ctx, s.db, userID, id)
	if err != nil {
		return book.Position{}, err
	}
	if p.Status != fx.PositionOpen {
		return book.Position{}, fx.Errorf(fx.ECONFLICT, "Position %d is closed.", id)
	}
	if userID != 0 {
		// A trader's change: a DISABLED account is read-only (read unlocked, as the position).
		a, err := book.LoadAccount(ctx, s.db, userID, p.AccountID)
		if err != nil {
			return book.Position{}, err
		}
		if err := stateRefusal(a, actModify); err != nil {
			return book.Position{}, err
		}
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return book.Position{}, err
	}
	in, ok := cat.Instruments[p.Symbol]
	if !ok {
		return book.Position{}, fmt.Errorf("position %d: instrument %s is missing", id, p.Symbol)
	}
	q, ok := book.NewMarket(s.prices, cat).Quote(p.Symbol)
	if !ok {
		return book.Position{}, book.ErrPricing()
	}
	newSL, newTP := p.SL, p.TP
	if sl.Set {
		newSL = sl.Value
	}
	if tp.Set {
		newTP = tp.Value
	}
	ref := q.Bid
	if p.Side == fx.Sell {
		ref = q.Ask
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
		return book.Position{}, err
	}
	tw, err := resolveTrail(in, p, q, trail)
	if err != nil {
		return book.Position{}, err
	}
	// The UPDATE can be a deadlock's victim: it may reach the row through the open-positions
	// index while a close holding the row waits to change that index.
	var n int64
	err = s.retry(ctx, func() error {
		// position.modified goes in with the change, of the row as the UPDATE left it.
		n, err = s.changeOne(ctx, fmt.Sprintf("modify position %d", id), func(tx *sql.Tx) (events.Event, error) {
			p, err := book.LoadPosition(ctx, tx, 0, id)
			if err != nil {
				return events.Event{}, err
			}
			user, err := ownerOf(ctx, tx, p.AccountID)
			if err != nil {
				return events.Event{}, err
			}
			return events.Event{AccountID: p.AccountID, UserID: user, Type: events.PositionModified, Payload: events.PositionOf(p), Term: s.term()}, nil
		}, tw.sql(), tw.args(newSL, newTP, id)...)
		return err
	})
	if err != nil {
		return book.Position{}, err
	}
	if n == 0 {
		return book.Position{}, fx.Errorf(fx.ECONFLICT, "Position %d is closed.", id)
	}
	s.notify(ctx, append([]risk.Change{{Kind: risk.PositionModified, Position: risk.Position{ID: id, SL: floatOf(newSL), TP: floatOf(newTP)}}}, tw.change(id)...)...)
	if link, ok := s.links.get(id); ok {
		s.reserveClose(link.tradeID, newSL, newTP)
	}
	return book.LoadPosition(ctx, s.db, userID, id)
}

// CloseResult is a (partial) close: the position after it and the profit deal.
type CloseResult struct {
	Position book.Position
	Deal     book.Deal
	// Adjustment is negative balance protection's deal when the close left the account below
	// zero with no position open (protect); nil otherwise.
	Adjustment *book.Deal
}

// ClosePosition closes volume lots (nil: all) of userID's position id at this process's price.
// The close joins the holder's group commit (committer): it is applied to the rows its batch
// locks, after every write before it in the batch, and answered once the batch committed. Of
// racing closes of one position, one wins and the rest answer ECONFLICT.
//
// An EXTERNAL position (linked to a venue trade) is closed at the venue first and booked at the
// venue's price (closeExternal).
func (s *Service) ClosePosition(ctx context.Context, userID, id int64, volume *decimal.Decimal, reason fx.CloseReason) (CloseResult, error) {
	if err := s.admit(ctx, gate.Close, "close position", slog.Int64("position_id", id)); err != nil {
		return CloseResult{}, err
	}
	return s.closePosition(ctx, userID, 0, id, volume, reason, nil, time.Now())
}

// closePosition is ClosePosition once its work was admitted — by ClosePosition's gate for a
// trader, by the risk engine's for its own closes (one gate per unit of work) — with the moment
// the close was triggered (the tick, or the request's arrival), from which a venue close's own
// time is measured. The batch's fence still refuses it if the lease was lost meanwhile.
// accountID is the position's account when the caller knows it (the risk engine), 0 otherwise:
// the batch then reads it from the position before it locks (one query per batch).
func (s *Service) closePosition(ctx context.Context, userID, accountID, id int64, volume *decimal.Decimal, reason fx.CloseReason, stop *risk.StopOut, trigger time.Time) (CloseResult, error) {
	if link, ok := s.links.get(id); ok {
		return s.closeExternal(ctx, userID, id, link, volume, reason, stop, trigger)
	}
	w := &closeWrite{s: s, Queued: book.NewQueued(ctx, gate.Close, "close position", accountID, slog.Int64("position_id", id), slog.String("reason", string(reason))),
		userID: userID, id: id, volume: volume, reason: reason, stop: stop}
	s.commits.Submit(w)
	var linked errLinked
	if errors.As(w.Err, &linked) {
		// Linked by a commit this process did not see (another holder's, before a takeover).
		s.links.set(id, linked.link)
		return s.closeExternal(ctx, userID, id, linked.link, volume, reason, stop, trigger)
	}
	if w.Err != nil {
		return CloseResult{}, w.Err
	}
	s.reportReset(ctx, w)
	return w.res, nil
}

// closeWrite is one close waiting for its group commit.
// LockedAccount is the position's account, which a close learns from the plan when its
// request named only the position.
func (w *closeWrite) LockedAccount(l *book.Plan) int64 {
	if w.Account == 0 {
		return l.AccountOf[w.id]
	}
	return w.Account
}

type closeWrite struct {
	book.Queued
	s      *Service // the desk that queued it (its venue, its links, its log)
	userID int64
	id     int64
	volume *decimal.Decimal
	reason fx.CloseReason
	stop   *risk.StopOut // a stop-out's decision, recorded on its account.stop_out
	// venuePrice, when set, is the venue's price of a close it executed: booked (plus markup)
	// instead of the desk's quote, whatever the desk's market state (halted, closed, unquoted),
	// because it already happened. Converting its profit to the account's currency still needs
	// the desk's prices: without them the booking waits for the reconciler.
	venuePrice *decimal.Decimal
	txID       int64 // the venue transaction booked (the cursor), with venuePrice
	// alsoBooked are the fill's other venue transactions (a FIX close filled in several
	// executions), recorded as booked for the position in fx_deal_venue_fill.
	alsoBooked []int64

	res  CloseResult
	deal int // its deal's index in the batch
	// nbp is the index in the batch of negative balance protection's ADJUSTMENT after this
	// close (-1: none), and reset its figures.
	nbp   int
	reset nbpReset
	a     book.Account
	trade routing.Profile // the close's trade, added to the account's profile
	fifo  *fifoClose      // a stop's close the oldest positions took (fifo.go)
}

func (w *closeWrite) Wants(l *book.Plan) {
	l.Position(w.id, w.Account != 0)
	if w.venuePrice != nil && w.txID > 0 {
		l.Fill(w.id, w.txID)
		for _, tx := range w.alsoBooked {
			l.Fill(w.id, tx)
		}
	}
}

func (w *closeWrite) Apply(r *book.Rows) error {
	w.res, w.deal, w.nbp, w.reset, w.trade = CloseResult{}, -1, -1, nbpReset{}, routing.Profile{}
	w.fifo = nil
	p, exists := r.Positions[w.id]
	a, found := r.Accounts[w.Account]
	if !exists || !found || book.OwnedBy(*a, found, w.userID, p.AccountID) != nil || a.ID != p.AccountID {
		return fx.Errorf(fx.ENOTFOUND, "Position %d not found.", w.id)
	}
	if p.Status != fx.PositionOpen {
		return errAlreadyClosed(w.id)
	}
	// A trader's close of a DISABLED account is refused; a close the venue already made is
	// booked whatever the state (it happened).
	if w.reason == fx.CloseClient && w.venuePrice == nil {
		if err := stateRefusal(*a, actClose); err != nil {
			return err
		}
	}
	// The account group's terms: its markup on the close price, its volume limits.
	t, ok := termsOf(r.Catalog, a.Group, p.Symbol)
	if !ok {
		return fmt.Errorf("position %d: instrument %s is missing", w.id, p.Symbol)
	}
	in := t.Instrument
	if w.venuePrice != nil {
		return w.applyVenue(r, a, p, in)
	}
	if p.VenueTradeID != nil {
		return errLinked{venueLink{tradeID: *p.VenueTradeID, symbol: p.Symbol}}
	}
	if in.Status == fx.InstrumentHalted {
		return book.ErrHalted(in.Symbol)
	}
	if w.reason == fx.CloseClient {
		if err := checkTraderClose(t); err != nil {
			return err
		}
	}
	if w.volume != nil {
		if err := checkVolume(in, *w.volume); err != nil {
			return err
		}
	}
	q, err := r.Market.Tradable(p.Symbol)
	if err != nil {
		return err
	}
	price := book.ClosePrice(in, q, p.Side)
	vol := p.Volume
	if w.volume != nil {
		vol = *w.volume
		if vol.GreaterThan(p.Volume) {
			return fx.Errorf(fx.ECONFLICT, "Position %d has %s lots open; cannot close %s.", w.id, p.Volume, vol)
		}
		if rest := p.Volume.Sub(vol); rest.IsPositive() && rest.LessThan(in.VolumeMin) {
			return fx.Errorf(fx.EINVALID, "Closing %s lots would leave %s, below %s's minimum of %s; close all or less.", vol, rest, in.Symbol, in.VolumeMin)
		}
	}
	if handled, err := w.fifoApply(r, a, p, in, vol, price); handled {
		return err
	}
	return w.book(r, a, p, in, vol, price)
}

// applyVenue books a close the venue executed at w.venuePrice: the volume it closed (at most
// what is open), at its price plus the group's markup.
func (w *closeWrite) applyVenue(r *book.Rows, a *book.Account, p *book.Position, in catalog.Instrument) error {
	for _, tx := range append([]int64{w.txID}, w.alsoBooked...) {
		if r.Booked[book.FillKey{Position: w.id, Tx: tx}] {
			return fmt.Errorf("close position %d: venue fill %d: %w", w.id, tx, book.ErrAlreadyBooked)
		}
	}
	vol := p.Volume
	if w.volume != nil && w.volume.LessThan(vol) {
		vol = *w.volume
	}
	if !vol.IsPositive() {
		return errAlreadyClosed(w.id)
	}
	closing := fx.Sell
	if p.Side == fx.Sell {
		closing = fx.Buy
	}
	if err := w.book(r, a, p, in, vol, venueFillPrice(in, closing, *w.venuePrice)); err != nil {
		return err
	}
	if w.txID > 0 {
		tx := w.txID
		r.Deals[w.deal].VenueTransactionID = &tx
		for _, other := range w.alsoBooked {
			r.Writes.Exec("INSERT INTO `fx_deal_venue_fill` (`positionId`, `venueTransactionId`, `dealTransactionId`) VALUES (?, ?, ?)", w.id, other, tx)
		}
	}
	w.s.advanceCursor(r, w.txID)
	return nil
}

// book closes vol lots of the locked position p at price.
func (w *closeWrite) book(r *book.Rows, a *book.Account, p *book.Position, in catalog.Instrument, vol, price decimal.Decimal) error {
	profit, ok := r.Market.Convert(book.ProfitQuote(in, p.Side, vol, vol.Mul(p.OpenPrice), price), in.Quote, a.Currency)
	if !ok {
		return book.ErrPricing()
	}
	if w.reason == fx.CloseDealer {
		// A dealer's close carries its audit row (dealerAudit): refused here, before any row
		// changes, when nobody is named to record.
		if _, ok := audit.ActorFrom(w.Ctx); !ok {
			return audit.ErrNoActor
		}
	}
	// The rules passed: from here the close changes the locked rows the rest of the batch sees.
	before := *p
	volumeBefore := p.Volume
	key := closeKey(positionModeOf(r.Catalog, a), p, volumeBefore)
	p.Volume = p.Volume.Sub(vol)
	p.RealizedProfit = p.RealizedProfit.Add(profit)
	// The account's stored equity and used margin are left to the next mark (reconcile, or this
	// account's next fill): summing its exposures here would cost every close a scan of the
	// account's positions.
	if p.Volume.IsZero() {
		// closePrice is the price that closed the position; a partial close's price is on its deal.
		recorded, now := string(w.reason), r.Now
		p.Status, p.ClosedAt, p.CloseReason, p.ClosePrice = fx.PositionClosed, &now, &recorded, &price
		if w.reason == fx.CloseTrailingStop {
			firedTrailLevel(w.Ctx, r, p, in)
		}
	}
	// Written once per position at the end of the batch, with the batch's other closes
	// (closeUpdate), from the locked row as the batch's writes left it.
	r.Closing(p)
	r.Expose(a.ID, p.Symbol, p.Side, vol.Neg(), vol.Mul(p.OpenPrice).Neg())
	side, sym := p.Side, p.Symbol
	// The closing fill's markup rides on its deal, for the dealer's P&L (docs/pnl.md).
	w.deal = r.Post(a, book.Deal{Type: fx.DealProfit, Amount: profit, OrderID: &p.OrderID, PositionID: &p.ID, Symbol: &sym,
		Side: &side, Volume: &vol, Price: &price, Markup: r.Market.Markup(in, vol, a.Currency), IdempotencyKey: key,
		Comment: "close " + strings.ToLower(string(w.reason))})
	// The close is one trade of the account's profile, added in its transaction.
	held := r.Now.Sub(p.OpenedAt)
	w.trade = routing.Trade(r.Deals[w.deal].Amount, held)
	closedAt := r.Now
	w.trade.LastTradeAt = &closedAt
	addTrade(&r.Writes, a.ID, w.trade)
	closed := events.PositionPartlyClosed
	if p.Volume.IsZero() {
		closed = events.PositionClosed
	}
	if err := events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: closed, Term: w.s.term(),
		Payload: events.Closed{Position: events.PositionOf(*p), ClosedVolume: vol.String(), Price: price.String(),
			Profit: fx.FormatMoney(a.Currency, profit), Reason: string(w.reason)}}); err != nil {
		return err
	}
	if err := w.addStopOut(r, a, p, vol, price, profit); err != nil {
		return err
	}
	if err := w.protect(r, a, p, key); err != nil {
		return err
	}
	if w.reason == fx.CloseDealer {
		if err := w.dealerAudit(r, before, vol, price); err != nil {
			return err
		}
	}
	w.res.Position, w.a = *p, *a
	return nil
}

func (w *closeWrite) Committed(r *book.Rows, ids *book.IDs) []risk.Change {
	w.res.Deal = r.DealAt(w.deal, ids)
	if w.fifo != nil {
		return w.fifo.committed(w)
	}
	if w.nbp >= 0 {
		d := r.DealAt(w.nbp, ids)
		w.res.Adjustment = &d
	}
	w.s.profiles.closed(w.a.ID, w.trade)
	if w.res.Position.Status == fx.PositionClosed {
		w.s.links.drop(w.id)
		return []risk.Change{{Kind: risk.PositionClosed, Position: risk.Position{ID: w.id}}, balanceChanged(w.a)}
	}
	return []risk.Change{{Kind: risk.PositionReduced, Position: risk.Position{ID: w.id, Volume: w.res.Position.Volume.InexactFloat64()}}, balanceChanged(w.a)}
}

func (w *closeWrite) Failed(err error) error {
	if store.IsDuplicateKey(err) && w.txID > 0 {
		// The same fill booked by a write this batch could not see (another batch meanwhile).
		return fmt.Errorf("close position %d: venue fill %d: %w: %w", w.id, w.txID, book.ErrAlreadyBooked, err)
	}
	return fmt.Errorf("close position %d: %w", w.id, err)
}

// addStopOut adds, when w is a stop-out, the stop-out as such beside the close of vol lots of p
// (the fired position, or an older one a FIFO account closed in its place): what it closed and
// where it left the account (before any reset to zero, which has its own event).
func (w *closeWrite) addStopOut(r *book.Rows, a *book.Account, p *book.Position, vol, price, profit decimal.Decimal) error {
	if w.reason != fx.CloseStopOut {
		return nil
	}
	return events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.AccountStopOut, Term: w.s.term(),
		Payload: events.StopOut{AccountID: a.ID, PositionID: p.ID, Symbol: p.Symbol, ClosedVolume: vol.String(), Price: price.String(),
			Profit: fx.FormatMoney(a.Currency, profit), Currency: a.Currency, BalanceAfter: fx.FormatMoney(a.Currency, a.Balance),
			StopOutLevel: r.Catalog.AccountGroup(a.Group).StopOutLevel.String(), Decision: stopOutDecision(w.stop, a.Currency)}})
}

// stopOutDecision is the risk engine's decision d as account.stop_out records it: levels and
// markups in the shortest form that reads back as the engine's float, so a judge compares the
// very figures the engine compared; equity and used margin as money in currency.
func stopOutDecision(d *risk.StopOut, currency string) *events.StopOutDecision {
	if d == nil {
		return nil
	}
	exact := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	out := &events.StopOutDecision{DecidedAt: d.DecidedAt.UTC(), Group: d.Group, StopOutLevel: exact(d.StopOutLevel), MarginLevel: exact(d.MarginLevel),
		Equity: fx.FormatMoney(currency, decimal.NewFromFloat(d.Equity)), UsedMargin: fx.FormatMoney(currency, decimal.NewFromFloat(d.UsedMargin)),
		Symbols: make([]events.StopOutSymbol, len(d.Symbols))}
	for i, s := range d.Symbols {
		out.Symbols[i] = events.StopOutSymbol{Symbol: s.Symbol, Leverage: s.Leverage, Markup: exact(s.Markup)}
	}
	return out
}
