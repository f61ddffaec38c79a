package trading

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/ledger"
	"fxdesk/internal/risk"
	"fxdesk/internal/store"
)

// OrderRequest is a submitted order, already decoded.
type OrderRequest struct {
	AccountID    int64
	Symbol       string
	Side         fx.Side
	Type         fx.OrderType
	Volume       decimal.Decimal
	Price        *decimal.Decimal
	SL, TP       *decimal.Decimal
	TimeInForce  fx.TimeInForce // "" means GTC
	ExpiresAt    *time.Time
	RequestNonce string
}

// OrderResult is what a submit did: the order, the position a market order opened, and its
// commission deal. Replayed is true when the requestNonce had been seen and nothing new happened.
type OrderResult struct {
	Order      Order
	Position   *Position
	Commission *Deal
	Replayed   bool
}

// PlaceOrder submits an order for userID. A MARKET order fills now at this process's quote in
// one fenced transaction; LIMIT and STOP orders rest as PENDING.
func (s *Service) PlaceOrder(ctx context.Context, userID int64, r OrderRequest) (OrderResult, error) {
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return OrderResult{}, err
	}
	in, ok := cat.instruments[r.Symbol]
	if !ok || !in.Enabled {
		return OrderResult{}, fx.Errorf(fx.EINVALID, "Unknown symbol %q.", r.Symbol)
	}
	switch in.Status {
	case fx.InstrumentHalted:
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", in.Symbol)
	case fx.InstrumentCloseOnly:
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "%s is close-only: new positions and orders are refused.", in.Symbol)
	}
	if err := checkVolume(in, r.Volume); err != nil {
		return OrderResult{}, err
	}
	expires, err := s.checkOrderShape(in, &r)
	if err != nil {
		return OrderResult{}, err
	}
	m := newMarket(s.prices, cat)
	q, err := m.tradable(in.Symbol)
	if err == nil {
		err = s.gate.Admit(ctx, gate.Fill, slog.String("op", "fill order"), slog.Int64("account_id", r.AccountID), slog.String("symbol", in.Symbol))
	}
	if err != nil {
		// This process cannot fill now, but a retry of a submit that already filled can still be
		// answered from the database. Ownership and the nonce are otherwise checked inside the
		// fill's transaction, which keeps the hot path to the statements it must send.
		if r.RequestNonce != "" {
			if _, aerr := loadAccount(ctx, s.db, userID, r.AccountID); aerr != nil {
				return OrderResult{}, aerr
			}
			if o, ok, lerr := loadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce); lerr != nil || ok {
				return s.replay(ctx, o, ok, lerr)
			}
		}
		return OrderResult{}, err
	}
	digits := int32(in.Digits)
	var price decimal.Decimal
	if r.Type == fx.Market {
		price = fillPrice(in, q, r.Side)
		ref := q.bid
		if r.Side == fx.Sell {
			ref = q.ask
		}
		if err := checkStops(in, r.Side, ref, r.SL, r.TP); err != nil {
			return OrderResult{}, err
		}
	} else {
		price = *r.Price
		ref, word := q.ask, "ask"
		if r.Side == fx.Sell {
			ref, word = q.bid, "bid"
		}
		// Limits wait for a better price, stops for a worse one, both measured on the price the
		// order would fill at.
		wantBelow := (r.Side == fx.Buy) == (r.Type == fx.Limit)
		if wantBelow && !price.LessThan(ref) {
			return OrderResult{}, fx.Errorf(fx.EINVALID, "A %s %s at %s must be below the %s (%s).", sideWord(r.Side), strings.ToLower(string(r.Type)), price.StringFixed(digits), word, ref.StringFixed(digits))
		}
		if !wantBelow && !price.GreaterThan(ref) {
			return OrderResult{}, fx.Errorf(fx.EINVALID, "A %s %s at %s must be above the %s (%s).", sideWord(r.Side), strings.ToLower(string(r.Type)), price.StringFixed(digits), word, ref.StringFixed(digits))
		}
		if err := checkStops(in, r.Side, price, r.SL, r.TP); err != nil {
			return OrderResult{}, err
		}
	}

	// Round trip one: lock the account, find a retried nonce, sum the exposures.
	tx, locks, err := s.begin(ctx, gate.Fill, "fill order")
	if err != nil {
		return OrderResult{}, err
	}
	defer tx.Rollback()
	var a Account
	var found, retried bool
	var original Order
	var exps []exposure
	locks.query(rowInto(&a, &found, scanAccount), lockAccountSQL, r.AccountID)
	if r.RequestNonce != "" {
		// The account lock serialises submits of one account, so a retry racing the original
		// waits for it and then finds it here, before any rule could refuse the retry.
		locks.query(rowInto(&original, &retried, scanOrder), nonceSQL, r.AccountID, r.RequestNonce)
	}
	locks.query(exposuresInto(&exps), exposuresSQL, r.AccountID)
	if err := tx.lock(ctx, locks, "fill order"); err != nil {
		return OrderResult{}, err
	}
	if err := ownedBy(a, found, userID, r.AccountID); err != nil {
		return OrderResult{}, err
	}
	if retried {
		tx.Rollback()
		return s.replay(ctx, original, true, nil)
	}
	var commission decimal.Decimal
	var after Metrics
	if r.Type == fx.Market {
		if commission, after, err = fillCheck(m, cat, in, a, exps, r.Side, r.Volume, price); err != nil {
			return OrderResult{}, err
		}
	} else {
		g := cat.accountGroup(a.Group)
		before, ok := m.metrics(a, g, a.Balance, exps)
		if !ok {
			return OrderResult{}, errPricing()
		}
		if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
			return OrderResult{}, fx.Errorf(fx.ECONFLICT, "New orders are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
				before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
		}
	}

	// Round trip two: the order, and for a MARKET order its position, balance and commission.
	o := Order{AccountID: a.ID, Symbol: in.Symbol, Side: r.Side, Type: r.Type, Volume: r.Volume, Price: r.Price, SL: r.SL, TP: r.TP,
		TimeInForce: r.TimeInForce, ExpiresAt: expires, Status: fx.OrderPending, CreatedAt: s.now().UTC()}
	if r.RequestNonce != "" {
		o.RequestNonce = &r.RequestNonce
	}
	if r.Type == fx.Market {
		o.Status, o.FillPrice = fx.OrderFilled, &price
	}
	var b batch
	b.exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `sl`, `tp`, `timeInForce`, "+
		"`expiresAt`, `status`, `requestNonce`, `fillPrice`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		o.AccountID, o.Symbol, o.Side, o.Type, o.Volume, o.Price, o.SL, o.TP, o.TimeInForce, o.ExpiresAt, o.Status, o.RequestNonce, o.FillPrice)
	b.exec("SET @fx_order_id = LAST_INSERT_ID()")
	var f *fillWrite
	if r.Type == fx.Market {
		if f, err = addFill(&b, &a, in, o, price, commission, after, o.CreatedAt); err != nil {
			return OrderResult{}, err
		}
	} else {
		f = &fillWrite{}
		b.query(scanFirst(new(bool), func(r *sql.Rows) error { return r.Scan(&f.orderID) }), "SELECT @fx_order_id")
	}
	if err := tx.commit(ctx, &b); err != nil {
		if store.IsDuplicateKey(err) && r.RequestNonce != "" {
			// A retry that was not committed when the first round trip looked is now.
			tx.Rollback()
			o, ok, err := loadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce)
			return s.replay(ctx, o, ok, err)
		}
		return OrderResult{}, fmt.Errorf("fill order: %w", err)
	}
	o.ID = f.orderID
	out := OrderResult{Order: o}
	if r.Type == fx.Market {
		p := f.position()
		out.Order.PositionID = &p.ID
		out.Position, out.Commission = &p, f.commission()
		s.notify(ctx, positionOpened(p), balanceChanged(a))
	} else {
		s.notify(ctx, orderPlaced(o))
	}
	return out, nil
}

// fillCheck prices a fill of volume lots on side at price for the locked account a, whose open
// positions sum to exps: the commission it costs and the account's metrics after it. It
// refuses (ECONFLICT) a fill that increases margin while the account is below its margin-call
// level or beyond its free margin.
func fillCheck(m *market, cat *catalog, in Instrument, a Account, exps []exposure, side fx.Side, volume, price decimal.Decimal) (decimal.Decimal, Metrics, error) {
	commission := decimal.Zero
	if in.Group.CommissionPerLot.IsPositive() {
		c, ok := m.convert(in.Group.CommissionPerLot.Mul(volume), in.Group.CommissionCurrency, a.Currency)
		if !ok {
			return decimal.Zero, Metrics{}, errPricing()
		}
		commission = c
	}
	g := cat.accountGroup(a.Group)
	before, ok := m.metrics(a, g, a.Balance, exps)
	if !ok {
		return decimal.Zero, Metrics{}, errPricing()
	}
	after, ok := m.metrics(a, g, a.Balance.Sub(commission), append(exps, exposure{Symbol: in.Symbol, Side: side, Volume: volume, VolumePrice: volume.Mul(price)}))
	if !ok {
		return decimal.Zero, Metrics{}, errPricing()
	}
	if after.UsedMargin.GreaterThan(before.UsedMargin) {
		if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
			return decimal.Zero, Metrics{}, fx.Errorf(fx.ECONFLICT, "Orders that increase margin are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
				before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
		}
		if after.FreeMargin.IsNegative() {
			return decimal.Zero, Metrics{}, fx.Errorf(fx.ECONFLICT, "Not enough free margin: this order needs %s %s of margin and free margin would be %s %s.",
				fx.FormatMoney(a.Currency, after.UsedMargin.Sub(before.UsedMargin)), a.Currency, fx.FormatMoney(a.Currency, after.FreeMargin), a.Currency)
		}
	}
	return commission, after, nil
}

// fillWrite is a fill written by a batch: the position and commission deal as they were
// written, whose ids the batch's last statement reports.
type fillWrite struct {
	pos                      Position
	deal                     *Deal
	orderID, posID, lastDeal int64
}

func (f *fillWrite) position() Position {
	p := f.pos
	p.ID, p.OrderID = f.posID, f.orderID
	return p
}

func (f *fillWrite) commission() *Deal {
	if f.deal == nil {
		return nil
	}
	d := *f.deal
	d.ID, d.OrderID, d.PositionID, d.IDsFrom = f.lastDeal, &f.orderID, &f.posID, nil
	d.IdempotencyKey += itoa(f.orderID)
	return &d
}

// addFill adds to b, after the statement that set @fx_order_id to the filled order o's id, the
// position o opens at price on the locked account a, with its commission deal (and the
// account's new marks, after), and the SELECT that reports the ids. It is the one ledger path
// of every fill: a MARKET submit and a resting order the risk engine triggers.
func addFill(b *batch, a *Account, in Instrument, o Order, price, commission decimal.Decimal, after Metrics, at time.Time) (*fillWrite, error) {
	f := &fillWrite{pos: Position{AccountID: a.ID, Symbol: in.Symbol, Side: o.Side, Volume: o.Volume, OpenVolume: o.Volume,
		OpenPrice: price, SL: o.SL, TP: o.TP, Commission: commission, RealizedProfit: decimal.Zero, Status: fx.PositionOpen, OpenedAt: at,
		Currency: a.Currency}}
	p := f.pos
	b.exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, "+
		"`sl`, `tp`, `commission`) VALUES (?, @fx_order_id, ?, ?, ?, ?, ?, ?, ?, ?)",
		p.AccountID, p.Symbol, p.Side, p.Volume, p.OpenVolume, p.OpenPrice, p.SL, p.TP, p.Commission)
	b.exec("SET @fx_position_id = LAST_INSERT_ID()")
	if commission.IsPositive() {
		side, sym, vol := o.Side, in.Symbol, o.Volume
		d, err := addDeal(b, a, Deal{Type: fx.DealCommission, Amount: commission.Neg(), Symbol: &sym, Side: &side, Volume: &vol, Price: &price,
			IdempotencyKey: "commission:order:", Comment: "commission at open", IDsFrom: &fillIDs}, &after)
		if err != nil {
			return nil, err
		}
		f.deal = &d
	} else {
		b.exec("UPDATE `fx_account` SET `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3) WHERE `id` = ?", after.Equity, after.UsedMargin, a.ID)
	}
	b.query(scanFirst(new(bool), func(r *sql.Rows) error { return r.Scan(&f.orderID, &f.posID, &f.lastDeal) }),
		"SELECT @fx_order_id, @fx_position_id, LAST_INSERT_ID()")
	return f, nil
}

// fillIDs are the batch variables holding a fill's order and position ids (see addFill).
var fillIDs = ledger.SessionIDs{Order: "@fx_order_id", Position: "@fx_position_id"}

// checkOrderShape checks the fields that depend on the order type and returns the expiry.
func (s *Service) checkOrderShape(in Instrument, r *OrderRequest) (*time.Time, error) {
	if r.TimeInForce == "" {
		r.TimeInForce = fx.GTC
	}
	if r.Type == fx.Market {
		if r.Price != nil {
			return nil, fx.Errorf(fx.EINVALID, "A MARKET order takes no price; it fills at the desk's quote.")
		}
		if r.TimeInForce != fx.GTC || r.ExpiresAt != nil {
			return nil, fx.Errorf(fx.EINVALID, "A MARKET order fills at once: timeInForce and expiresAt apply to LIMIT and STOP orders only.")
		}
		return nil, nil
	}
	if r.Price == nil {
		return nil, fx.Errorf(fx.EINVALID, "A %s order needs a price.", r.Type)
	}
	if err := checkPrice("price", in, *r.Price); err != nil {
		return nil, err
	}
	now := s.now()
	switch r.TimeInForce {
	case fx.GTC:
		if r.ExpiresAt != nil {
			return nil, fx.Errorf(fx.EINVALID, "expiresAt applies to GTD orders only.")
		}
		return nil, nil
	case fx.GTD:
		if r.ExpiresAt == nil || !r.ExpiresAt.After(now) {
			return nil, fx.Errorf(fx.EINVALID, "A GTD order needs expiresAt in the future (RFC 3339).")
		}
		t := r.ExpiresAt.UTC().Truncate(time.Millisecond)
		return &t, nil
	case fx.DAY:
		if r.ExpiresAt != nil {
			return nil, fx.Errorf(fx.EINVALID, "A DAY order expires at the next 17:00 New York rollover; expiresAt applies to GTD orders only.")
		}
		ro, err := fx.NextRollover(now)
		if err != nil {
			return nil, fmt.Errorf("DAY order expiry: %w", err)
		}
		t := ro.At.UTC()
		return &t, nil
	}
	return nil, fx.Errorf(fx.EINVALID, "timeInForce must be GTC, GTD or DAY.")
}

func (s *Service) replay(ctx context.Context, o Order, ok bool, err error) (OrderResult, error) {
	if err != nil {
		return OrderResult{}, err
	}
	if !ok {
		return OrderResult{}, fmt.Errorf("request nonce collided but the original order is gone")
	}
	out := OrderResult{Order: o, Replayed: true}
	if o.PositionID != nil {
		p, err := loadPosition(ctx, s.db, 0, *o.PositionID)
		if err != nil {
			return OrderResult{}, err
		}
		out.Position = &p
	}
	return out, nil
}

// Orders lists userID's orders, newest first.
func (s *Service) Orders(ctx context.Context, userID, accountID int64, status string, limit int) ([]Order, error) {
	return listOrders(ctx, s.db, userID, accountID, status, clampLimit(limit))
}

// CancelOrder cancels a PENDING order of userID (ECONFLICT once it filled, expired or was
// cancelled). It moves no money, so it needs no price and no fence.
func (s *Service) CancelOrder(ctx context.Context, userID, id int64) (Order, error) {
	o, err := loadOrder(ctx, s.db, userID, id)
	if err != nil {
		return Order{}, err
	}
	res, err := s.db.ExecContext(ctx, "UPDATE `fx_order` SET `status` = 'CANCELLED' WHERE `id` = ? AND `status` = 'PENDING'", id)
	if err != nil {
		return Order{}, fmt.Errorf("cancel order %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		o, _ = loadOrder(ctx, s.db, userID, id)
		return Order{}, fx.Errorf(fx.ECONFLICT, "Order %d is %s and can no longer be cancelled.", id, o.Status)
	}
	s.notify(ctx, risk.Change{Kind: risk.OrderCancelled, Order: risk.Order{ID: id}})
	return loadOrder(ctx, s.db, userID, id)
}
