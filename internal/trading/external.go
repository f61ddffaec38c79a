package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/venue"
)

// A-book execution (docs/architecture.md, «A-book execution and the reconciler»). An account whose
// group is EXTERNAL trades straight through: the venue fills first and the desk books the venue's
// price plus the group's markup. The order's identity is written before the request leaves (a
// SENDING row, its id the client id at the venue), the venue's answer is booked through the same
// group commit as every desk-priced write, and an answer that never came is never re-sent: the
// reconciler (internal/execution) resolves it by the client id.

// Venue is the execution venue as trading uses it (*venue.Sender): venue.API calls run on the
// executor's pre-sized workers, with own time measured from trigger to the request written.
type Venue interface {
	// Reachable is false while the venue cannot be reached; EXTERNAL opens are refused then.
	Reachable() bool
	// AccountID names the venue account (the cursor's key).
	AccountID() string
	PlaceMarket(ctx context.Context, o venue.MarketOrder, trigger time.Time) (venue.Outcome, error)
	CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error)
}

// defaultVenueBound is Config.VenueBound's default.
const defaultVenueBound = 30 * time.Second

// venueLink is what the holder remembers of an EXTERNAL position, so that a close the risk
// engine triggers goes to the venue without reading the database first (own time).
type venueLink struct {
	tradeID string
	symbol  string
}

// links maps open EXTERNAL positions to their venue trades, so that a close the risk engine
// triggers goes to the venue without a database read on its way (own time). The risk view's load
// replaces it; every commit that opens or ends a link keeps it. A link it misses (another
// holder's, before a takeover) is found by the close's batch (errLinked), so it is a cache, never
// the record.
type links struct {
	mu sync.Mutex
	m  map[int64]venueLink
}

func (l *links) get(id int64) (venueLink, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[id]
	return v, ok
}

func (l *links) set(id int64, v venueLink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[int64]venueLink{}
	}
	l.m[id] = v
}

func (l *links) replace(m map[int64]venueLink) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m = m
}

func (l *links) drop(id int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

// busy counts the EXTERNAL orders and positions this process is sending to the venue or
// booking right now. The reconciler leaves them to their own send: a trade the venue has filled
// or closed a moment ago, before its booking committed, is that send's to book, not a repair.
type busy struct {
	mu                sync.Mutex
	orders, positions map[int64]int
}

func (b *busy) hold(m *map[int64]int, id int64) func() {
	b.mu.Lock()
	if *m == nil {
		*m = map[int64]int{}
	}
	(*m)[id]++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if (*m)[id]--; (*m)[id] <= 0 {
			delete(*m, id)
		}
		b.mu.Unlock()
	}
}

// VenueBusy is true while this process is sending or booking order orderID or position
// positionID (0: not asked) at the venue.
func (b *ABook) VenueBusy(orderID, positionID int64) bool {
	s := b.s
	s.busy.mu.Lock()
	defer s.busy.mu.Unlock()
	return (orderID != 0 && s.busy.orders[orderID] > 0) || (positionID != 0 && s.busy.positions[positionID] > 0)
}

// ClientID is the venue client id of desk order id.
func ClientID(orderID int64) string { return strconv.FormatInt(orderID, 10) }

// venueUnits is lots of in on side as signed venue units.
func venueUnits(in catalog.Instrument, side fx.Side, lots decimal.Decimal) decimal.Decimal {
	u := lots.Mul(in.ContractSize)
	if side == fx.Sell {
		u = u.Neg()
	}
	return u
}

// lotsOf is venue units as lots of in (the sign dropped).
func lotsOf(in catalog.Instrument, units decimal.Decimal) decimal.Decimal {
	return units.Abs().Div(in.ContractSize).Round(4)
}

// venueFillPrice is what the desk books for a venue fill at price on side: the venue's price
// plus the group's markup, as fillPrice adds it to the desk's own quote.
func venueFillPrice(in catalog.Instrument, side fx.Side, price decimal.Decimal) decimal.Decimal {
	return book.FillPrice(in, book.Quote{Bid: price, Ask: price}, side)
}

func errVenueUnavailable() error { return fx.Errorf(fx.EUNAVAILABLE, fx.MsgVenueUnavailable) }

var errVenueOutcomeUnknown error = &fx.Error{Code: fx.EUNKNOWN, Message: fx.MsgVenueOutcomeUnknown}

// cancelText is a venue cancel reason in the trader's words.
func cancelText(reason string) string {
	switch reason {
	case venue.ReasonInsufficientMargin:
		return "the venue has not enough margin for it"
	case venue.ReasonMarketHalted:
		return "the market is halted at the venue"
	case venue.ReasonBoundsViolation:
		return "the venue's price was beyond its priceBound"
	case venue.ReasonInsufficientLiquidity:
		return "the venue could fill only part of it, and a FOK order fills whole or not at all"
	}
	return "the venue cancelled it"
}

// sendOpen sends EXTERNAL order o, written SENDING by its batch, to the venue and books the
// answer. trigger is when the request arrived (own time).
func (s *Service) sendOpen(ctx context.Context, userID int64, o book.Order, in catalog.Instrument, trigger time.Time) (OrderResult, error) {
	attrs := []slog.Attr{slog.Int64("order_id", o.ID), slog.Int64("account_id", o.AccountID), slog.String("symbol", o.Symbol)}
	defer s.busy.hold(&s.busy.orders, o.ID)()
	// Whatever the trader's connection does from here, the order's fate is decided and booked.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.venueBound)
	defer cancel()
	if err := s.gate.Admit(ctx, gate.VenueSend, append(attrs, slog.String("op", "send order"))...); err != nil {
		// Never left: the row says so, and nothing will ever send it.
		s.endOrder(ctx, o.ID, fx.OrderNotSent, "dropped at the gate: the lease was not confirmed")
		return OrderResult{}, err
	}
	out, err := s.venue.PlaceMarket(ctx, venueMarketOrder(in, o), trigger)
	var verr *venue.Error
	switch {
	case err == nil && out.Fill != nil:
		return s.bookOpen(ctx, userID, o.ID, o.AccountID, in, *out.Fill, out.LastTransactionID)
	case err == nil && out.Cancelled != nil:
		s.endOrder(ctx, o.ID, fx.OrderRejected, out.Cancelled.Reason)
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "Order %d was not filled: %s (%s).", o.ID, cancelText(out.Cancelled.Reason), out.Cancelled.Reason)
	case err == nil:
		s.log.LogAttrs(ctx, slog.LevelError, "venue answered an order with neither a fill nor a cancel; it stays SENDING for the reconciler", attrs...)
		return OrderResult{}, errVenueOutcomeUnknown
	case errors.As(err, &verr):
		s.endOrder(ctx, o.ID, fx.OrderRejected, verr.Code)
		if verr.Status == 401 || verr.Status == 403 {
			s.log.LogAttrs(ctx, slog.LevelError, "venue refused the desk's credentials", append(attrs, slog.Any("err", err))...)
			return OrderResult{}, errVenueUnavailable()
		}
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "The venue refused order %d: %s", o.ID, verr.Message)
	case errors.Is(err, gate.ErrNotHolder):
		// Queued behind a burst past the trust window: the worker's gate check kept it back.
		s.endOrder(ctx, o.ID, fx.OrderNotSent, "dropped at the gate: the lease was not confirmed")
		return OrderResult{}, err
	case errors.Is(err, venue.ErrNotSent):
		// It provably never left: the identity row goes, so nothing is left written.
		s.dropUnsent(ctx, o.ID)
		s.log.LogAttrs(ctx, slog.LevelWarn, "venue unreachable; order not sent", append(attrs, slog.Any("err", err))...)
		return OrderResult{}, errVenueUnavailable()
	default:
		s.log.LogAttrs(ctx, slog.LevelWarn, "venue outcome unknown; the order stays SENDING and the reconciler resolves it by its client id", append(attrs, slog.Any("err", err))...)
		return OrderResult{}, errVenueOutcomeUnknown
	}
}

// endOrder ends SENDING order id with status and the venue's reason. A row that ends a link is true
// whoever writes it, so it is not fenced (docs/architecture.md, «The fence»); it changes only a
// SENDING row.
func (s *Service) endOrder(ctx context.Context, id int64, status, reason string) {
	if err := s.ABook().EndVenueOrder(ctx, id, status, reason); err != nil {
		s.log.ErrorContext(ctx, "could not end a venue order; the reconciler will", slog.Int64("order_id", id), slog.String("status", status), slog.Any("err", err))
	}
}

// EndVenueOrder marks SENDING (or NOT_SENT, for a late cancel) order id with status
// (REJECTED or NOT_SENT) and reason. It changes nothing if the order has moved on.
func (b *ABook) EndVenueOrder(ctx context.Context, id int64, status, reason string) error {
	s := b.s
	if status != fx.OrderRejected && status != fx.OrderNotSent {
		return fmt.Errorf("end venue order %d: %q is not an end state", id, status)
	}
	const end = "UPDATE `fx_order` SET `status` = ?, `venueReason` = ? WHERE `id` = ? AND `execution` = 'EXTERNAL' AND `status` IN ('SENDING', 'NOT_SENT')"
	if status == fx.OrderRejected {
		// order.rejected goes in with the change; an order that had moved on changes nothing and
		// writes none.
		return s.retry(ctx, func() error {
			_, err := s.changeOne(ctx, fmt.Sprintf("end venue order %d", id), func(tx *sql.Tx) (events.Event, error) {
				e, err := s.orderEvent(ctx, tx, events.OrderRejected, id)
				if err == nil {
					e.Payload = events.Rejected{Order: e.Payload.(events.Order), Reason: truncate(reason, 64)}
				}
				return e, err
			}, end, status, truncate(reason, 64), id)
			return err
		})
	}
	return s.retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, end, status, truncate(reason, 64), id)
		if err != nil {
			return fmt.Errorf("end venue order %d: %w", id, err)
		}
		return nil
	})
}

// dropUnsent removes the identity row of an order that provably never left this process.
func (s *Service) dropUnsent(ctx context.Context, id int64) {
	if err := s.retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, "DELETE FROM `fx_order` WHERE `id` = ? AND `status` = 'SENDING' AND `venueOrderId` IS NULL", id)
		return err
	}); err != nil {
		s.log.ErrorContext(ctx, "could not remove an unsent order; the reconciler will mark it NOT_SENT", slog.Int64("order_id", id), slog.Any("err", err))
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// bookOpen books venue fill f of EXTERNAL order orderID through the group commit.
func (s *Service) bookOpen(ctx context.Context, userID, orderID, accountID int64, in catalog.Instrument, f venue.Fill, txID int64) (OrderResult, error) {
	w := &venueFill{s: s, Queued: book.NewQueued(ctx, gate.Fill, "book venue fill", accountID, slog.Int64("order_id", orderID), slog.String("trade_id", f.TradeOpened)),
		userID: userID, orderID: orderID, in: in, price: f.Price, units: f.Units, trade: venueOpen{tradeID: f.TradeOpened, openedAt: f.Time},
		venueOrderID: f.OrderID, txID: max(txID, f.TransactionID)}
	s.commits.Submit(w)
	if w.Err != nil {
		s.log.ErrorContext(ctx, "venue filled an order the desk could not book; it stays SENDING and the reconciler adopts the trade",
			slog.Int64("order_id", orderID), slog.String("trade_id", f.TradeOpened), slog.Any("err", w.Err))
		return OrderResult{}, w.Err
	}
	return w.res, nil
}

// VenueAdoption is a venue trade the reconciler adopts for the desk order that sent it.
type VenueAdoption struct {
	OrderID int64 // the desk order (SENDING or NOT_SENT) whose client id the trade carries
	TradeID string
	Symbol  string
	Units   decimal.Decimal // signed, as the venue opened them
	Price   decimal.Decimal // the trade's open price
	// OpenedAt is when the venue opened the trade: the position's openedAt (zero: the booking's
	// time), so that a rollover between the venue's fill and the adoption is charged.
	OpenedAt time.Time
	// VenueOrderID is the venue's id of the order, stored on it as a fill from the order's own
	// answer stores it ("": unknown, NULL).
	VenueOrderID string
	// TransactionID is the venue transaction the adoption stems from (the cursor).
	TransactionID int64
}

// AdoptVenueTrade books venue trade a.TradeID for the desk order a.OrderID that sent it: the
// reconciler's Adopt. The order is filled at the trade's price and its position, opened when the
// venue opened the trade, linked to the trade; nothing is sent. It returns the position's id, or
// an error wrapping ErrAlreadyBooked when the order was filled meanwhile.
func (b *ABook) AdoptVenueTrade(ctx context.Context, a VenueAdoption) (int64, error) {
	s := b.s
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return 0, err
	}
	in, ok := cat.Instruments[a.Symbol]
	if !ok {
		return 0, fmt.Errorf("adopt trade %s: unknown symbol %s", a.TradeID, a.Symbol)
	}
	var account int64
	if err := s.db.QueryRowContext(ctx, "SELECT `accountId` FROM `fx_order` WHERE `id` = ?", a.OrderID).Scan(&account); err != nil {
		return 0, fmt.Errorf("adopt trade %s: order %d: %w", a.TradeID, a.OrderID, err)
	}
	w := &venueFill{s: s, Queued: book.NewQueued(ctx, gate.Fill, "adopt venue trade", account, slog.Int64("order_id", a.OrderID), slog.String("trade_id", a.TradeID)),
		orderID: a.OrderID, in: in, price: a.Price, units: a.Units, trade: venueOpen{tradeID: a.TradeID, openedAt: a.OpenedAt},
		venueOrderID: a.VenueOrderID, txID: a.TransactionID, adopted: true}
	s.commits.Submit(w)
	if w.Err != nil {
		return 0, w.Err
	}
	if w.res.Position == nil {
		return 0, fmt.Errorf("adopt trade %s: order %d: %w", a.TradeID, a.OrderID, book.ErrAlreadyBooked)
	}
	return w.res.Position.ID, nil
}

// venueOpen is what an EXTERNAL fill's position takes from the venue: the trade it is linked to
// and when the venue opened it (zero: unknown, the booking's time). The venue's record says when
// the trade opened — and so which rollovers it is charged — not the moment the desk booked it.
type venueOpen struct {
	tradeID  string
	openedAt time.Time
}

// venueFill books a venue's fill of an EXTERNAL order in a batch: the order FILLED at the
// venue's price plus markup, its position linked to the venue trade, its commission.
type venueFill struct {
	book.Queued
	s            *Service
	userID       int64 // 0: any owner (the reconciler)
	orderID      int64
	in           catalog.Instrument
	price        decimal.Decimal // the venue's
	units        decimal.Decimal // signed, as filled
	trade        venueOpen
	venueOrderID string
	txID         int64
	adopted      bool

	res  OrderResult
	fill openedFill
	a    book.Account
	done bool // the order was already booked: answered from it
}

func (w *venueFill) Wants(l *book.Plan) {
	l.Account(w.Account)
	l.ExposuresOf(w.Account)
	l.Order(w.orderID)
}

func (w *venueFill) Apply(r *book.Rows) error {
	w.res, w.fill, w.done = OrderResult{}, openedFill{}, false
	a, found := r.Accounts[w.Account]
	o, ok := r.Orders[w.orderID]
	if !found || !ok || book.OwnedBy(*a, found, w.userID, o.AccountID) != nil {
		return fx.Errorf(fx.ENOTFOUND, "Order %d not found.", w.orderID)
	}
	switch o.Status {
	case fx.OrderSending, fx.OrderNotSent:
	case fx.OrderFilled:
		w.done, w.res = true, OrderResult{Order: *o, Replayed: true}
		return nil
	default:
		return fx.Errorf(fx.ECONFLICT, "Order %d is %s; the venue's fill of it was not booked.", w.orderID, o.Status)
	}
	side := fx.Buy
	if w.units.IsNegative() {
		side = fx.Sell
	}
	if side != o.Side {
		return fmt.Errorf("order %d is a %s; the venue filled %s units", o.ID, o.Side, w.units)
	}
	// The account group's terms: its markup on the venue's price, its commission.
	t, _ := termsOf(r.Catalog, a.Group, w.in.Symbol)
	in := t.Instrument
	vol := lotsOf(in, w.units)
	price := venueFillPrice(in, side, w.price)
	// The venue filled it: the desk books it whatever its own rules would say now (a margin
	// shortfall is the risk engine's to act on). The commission is charged as for a desk fill;
	// without a price to convert it the booking waits (the order stays SENDING and the
	// reconciler adopts the trade), rather than book a fill without its commission.
	commission := decimal.Zero
	if in.Group.CommissionPerLot.IsPositive() {
		c, ok := r.Market.Convert(in.Group.CommissionPerLot.Mul(vol), in.Group.CommissionCurrency, a.Currency)
		if !ok {
			return book.ErrPricing()
		}
		commission = c
	}
	// The account's marks move with it where every exposure can be priced; otherwise the stored
	// marks stay until the next mark.
	var after *book.Metrics
	if m, ok := r.Market.Metrics(*a, r.Catalog.AccountGroup(a.Group), a.Balance.Sub(commission),
		append(r.Exposures[a.ID], book.Exposure{Symbol: in.Symbol, Side: side, Volume: vol, VolumePrice: vol.Mul(price)})); ok {
		after = &m
	}
	filled := *o
	filled.Status, filled.FillPrice = fx.OrderFilled, &price
	// An IOC the venue filled part of keeps the volume asked and records the part (bound.go).
	if filled.FilledVolume = partFilled(o, vol); filled.FilledVolume == nil {
		filled.Volume = vol
	}
	orderVar, _ := r.SessionVar("o")
	r.Writes.Exec("UPDATE `fx_order` SET `status` = 'FILLED', `fillPrice` = ?, `volume` = ?, `filledVolume` = ?, `venueOrderId` = ?, `venueReason` = ? WHERE `id` = ?",
		price, filled.Volume, filled.FilledVolume, nullIfEmpty(w.venueOrderID), adoptedReason(w.adopted), o.ID)
	r.Writes.Exec(book.SetVarSQL(orderVar, "?"), o.ID)
	var err error
	if w.fill, err = openPosition(r, a, in, filled, orderVar, price, commission, after, &w.trade, events.OrderFilled, w.s.term()); err != nil {
		return err
	}
	w.s.advanceCursor(r, w.txID)
	w.a = *a
	*o = filled
	return nil
}

func adoptedReason(adopted bool) any {
	if adopted {
		return "adopted by the reconciler"
	}
	return nil
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (w *venueFill) Committed(r *book.Rows, ids *book.IDs) []risk.Change {
	if w.done {
		return nil
	}
	p, d := w.fill.written(r, ids)
	o := w.fill.order
	o.ID, o.PositionID = p.OrderID, &p.ID
	w.res = OrderResult{Order: o, Position: &p, Commission: d}
	w.s.links.set(p.ID, venueLink{tradeID: w.trade.tradeID, symbol: p.Symbol})
	w.s.reserveClose(w.trade.tradeID, p.SL, p.TP)
	return []risk.Change{positionOpened(p), balanceChanged(w.a)}
}

func (w *venueFill) Failed(err error) error {
	return fmt.Errorf("book venue fill of order %d: %w", w.orderID, err)
}

// reserveClose has the venue name trade tradeID's whole close ahead of its trigger, where it can
// (venue.CloseReserver: FIX) and the position has a stop or a take-profit: the risk engine's close
// is then written without a commit in its way (docs/fix.md, «Reserved closes»).
func (s *Service) reserveClose(tradeID string, sl, tp *decimal.Decimal) {
	if r, ok := s.venue.(venue.CloseReserver); ok && tradeID != "" && (sl != nil || tp != nil) {
		r.ReserveClose(tradeID)
	}
}

// advanceCursor stores, with the batch's effects, that the venue's transaction txID is applied.
func (s *Service) advanceCursor(r *book.Rows, txID int64) {
	if txID <= 0 || s.venue == nil {
		return
	}
	r.Writes.Exec("INSERT INTO `fx_venue_cursor` (`venueAccount`, `lastTransactionId`) VALUES (?, ?) "+
		"ON DUPLICATE KEY UPDATE `lastTransactionId` = GREATEST(`lastTransactionId`, ?)", s.venue.AccountID(), txID, txID)
}
