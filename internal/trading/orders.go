package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/ledger"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
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
	LimitPrice   *decimal.Decimal // STOP_LIMIT only: the limit it rests at once its stop (Price) triggers
	SL, TP       *decimal.Decimal
	TimeInForce  fx.TimeInForce // "" means GTC
	ExpiresAt    *time.Time
	RequestNonce string
	PriceBound   *decimal.Decimal // MARKET only: the worst fill price accepted (bound.go)
}

// OrderResult is what a submit did: the order, the position a market order opened, and its
// commission deal. Replayed is true when the requestNonce had been seen and nothing new happened.
type OrderResult struct {
	Order      book.Order
	Position   *book.Position
	Commission *book.Deal
	Replayed   bool
}

// PlaceOrder submits an order for userID. A MARKET order fills now at this process's quote in
// one fenced transaction; LIMIT and STOP orders rest as PENDING.
func (s *Service) PlaceOrder(ctx context.Context, userID int64, r OrderRequest) (OrderResult, error) {
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return OrderResult{}, err
	}
	in, ok := cat.Instruments[r.Symbol]
	if !ok || !in.Enabled {
		return OrderResult{}, fx.Errorf(fx.EINVALID, "Unknown symbol %q.", r.Symbol)
	}
	switch in.Status {
	case fx.InstrumentHalted:
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "Trading in %s is halted.", in.Symbol)
	case fx.InstrumentCloseOnly:
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "%s is close-only: new positions and orders are refused.", in.Symbol)
	}
	// The volume's limits and the trade mode are the account group's, checked once the
	// account is known (checkOpen); its step is the instrument's.
	if err := checkVolumeStep(in, r.Volume); err != nil {
		return OrderResult{}, err
	}
	expires, err := s.checkOrderShape(in, &r)
	if err != nil {
		return OrderResult{}, err
	}
	m := book.NewMarket(s.prices, cat)
	q, err := m.Tradable(in.Symbol)
	if err == nil {
		err = s.gate.Admit(ctx, gate.Fill, slog.String("op", "fill order"), slog.Int64("account_id", r.AccountID), slog.String("symbol", in.Symbol))
	}
	if err != nil {
		// This process cannot fill now, but a retry of a submit that already filled can still be
		// answered from the database. Ownership and the nonce are otherwise checked inside the
		// fill's transaction, which keeps the hot path to the statements it must send.
		if r.RequestNonce != "" {
			if _, aerr := book.LoadAccount(ctx, s.db, userID, r.AccountID); aerr != nil {
				return OrderResult{}, aerr
			}
			if o, ok, lerr := book.LoadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce); lerr != nil || ok {
				return s.replay(ctx, r, o, ok, lerr)
			}
		}
		return OrderResult{}, err
	}
	if r.Type == fx.Market {
		ref := q.Bid
		if r.Side == fx.Sell {
			ref = q.Ask
		}
		if err := checkStops(in, r.Side, ref, r.SL, r.TP); err != nil {
			return OrderResult{}, err
		}
	} else {
		price := *r.Price
		if err := checkRestingPrice(in, r, q); err != nil {
			return OrderResult{}, err
		}
		if err := checkStops(in, r.Side, price, r.SL, r.TP); err != nil {
			return OrderResult{}, err
		}
	}

	// The trader's profile, when a routing rule reads it (docs/routing.md): from the holder's
	// memory, read once per account.
	var prof routing.Profile
	if cat.RoutingUsesProfile {
		if prof, err = s.profileFor(ctx, r.AccountID); err != nil {
			return OrderResult{}, err
		}
	}
	if r.Type == fx.Market {
		return s.fillMarket(ctx, userID, r, in, prof)
	}
	var res OrderResult
	err = s.retry(ctx, func() (err error) {
		res, err = s.placeResting(ctx, userID, r, in, cat, m, q, expires, prof)
		return err
	})
	if err != nil {
		return OrderResult{}, err
	}
	if !res.Replayed {
		s.notify(ctx, orderPlaced(res.Order))
	}
	return res, nil
}

// placeResting writes a LIMIT or STOP order as PENDING, in one transaction of its own (a resting
// order moves no money). Round trip one locks the account and reads, under that lock, a retried
// nonce, the open exposures and the account's pending orders; round trip two writes the order.
//
// Two caps hold here, both judged on rows read under the account lock that every placement
// takes, so two placements racing for the last place cannot both pass: the account's pending
// orders (Settings.MaxPendingOrders), and its free margin. As MT5-class servers do at placement,
// the order must fit the free margin: filled now at the quote q, commission included, it must
// leave free margin ≥ 0 (fillCheck: the check a MARKET order of its size passes). Margin is at
// the market, as for every open position, and the new position shows no profit: judged at its
// own price it would be credited, as unrealised profit, the distance a LIMIT waits for. Other
// pending orders are not added up: each is judged again, on the rows of its fill, when it
// triggers.
func (s *Service) placeResting(ctx context.Context, userID int64, r OrderRequest, in catalog.Instrument, cat *catalog.Catalog, m *book.Market, q book.Quote, expires *time.Time,
	prof routing.Profile) (OrderResult, error) {
	tx, locks, err := s.begin(ctx, gate.Fill, "place order")
	if err != nil {
		return OrderResult{}, err
	}
	defer tx.Rollback()
	pl, err := lockPlacement(ctx, tx, locks, r.AccountID, r.RequestNonce, "place order")
	if err != nil {
		return OrderResult{}, err
	}
	a, found, retried, original, exps, pending := pl.a, pl.found, pl.retried, pl.original, pl.exps, pl.pending
	if err := book.OwnedBy(a, found, userID, r.AccountID); err != nil {
		return OrderResult{}, err
	}
	if retried {
		tx.Rollback()
		return s.replay(ctx, r, original, true, nil)
	}
	if err := stateRefusal(a, actOpen); err != nil {
		return OrderResult{}, err
	}
	// Routed once, here: the order rests on the desk and fills there when it triggers.
	execution, rule, hedge := routeOf(cat, &a, in.Symbol, r.Volume, s.profileNow(cat, a.ID, prof))
	if execution == fx.External {
		return OrderResult{}, fx.Errorf(fx.EINVALID, "Account %d's orders of %s lots of %s are routed to the execution venue (%s), which takes MARKET orders only: resting %s orders are not routed there.",
			a.ID, r.Volume, in.Symbol, routedBy(rule), r.Type)
	}
	g := cat.AccountGroup(a.Group)
	// The account group's own cap, when it has one, replaces the desk setting for its accounts.
	if g.MaxPendingOrders != nil {
		if limit := *g.MaxPendingOrders; pending >= int64(limit) {
			return OrderResult{}, fx.Errorf(fx.ECONFLICT, "Account %d already has %d pending orders, the most an account of group %s may hold (its maxPendingOrders = %d): cancel one, or wait for one to fill or expire, before placing another.",
				a.ID, pending, g.Name, limit)
		}
	} else if limit := s.settings.MaxPendingOrders(); pending >= int64(limit) {
		return OrderResult{}, fx.Errorf(fx.ECONFLICT, "Account %d already has %d pending orders, the most one account may hold (setting %s = %d): cancel one, or wait for one to fill or expire, before placing another.",
			a.ID, pending, catalog.SettingMaxPendingOrders, limit)
	}
	t, _ := termsOf(cat, a.Group, in.Symbol)
	if err := checkRestingFits(m, cat, t, a, exps, r.Side, r.Volume, q); err != nil {
		return OrderResult{}, err
	}
	in = t.Instrument

	// Round trip two: the order.
	o := book.Order{AccountID: a.ID, Symbol: in.Symbol, Side: r.Side, Type: r.Type, Volume: r.Volume, Price: r.Price, SL: r.SL, TP: r.TP,
		TimeInForce: r.TimeInForce, ExpiresAt: expires, Status: fx.OrderPending, CreatedAt: s.now().UTC(), Execution: fx.Internal, RouteRuleID: rule,
		HedgePercent: hedge, LimitPrice: r.LimitPrice}
	if r.RequestNonce != "" {
		o.RequestNonce, o.RequestHash = &r.RequestNonce, r.hash()
	}
	var b book.Batch
	b.Exec(orderInsertSQL, o.AccountID, o.Symbol, o.Side, o.Type, o.Volume, o.Price, o.SL, o.TP, o.TimeInForce, o.ExpiresAt, o.Status, o.RequestNonce, o.RequestHash, o.FillPrice, o.RouteRuleID, o.HedgePercent)
	b.Exec(book.SetVarSQL(acceptedVar, "LAST_INSERT_ID()"))
	writeLimitPrice(&b, o, acceptedVar)
	b.Query(book.LastInsertID(&o.ID), "SELECT "+acceptedVar)
	// order.accepted goes in with the order; its id from the session variable the batch set.
	if err := events.Add(&b, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.OrderAccepted, Payload: events.OrderOf(o), Term: s.term(),
		FromSession: []events.SessionField{{Field: "id", Var: acceptedVar}}}); err != nil {
		return OrderResult{}, err
	}
	if err := tx.Commit(ctx, &b); err != nil {
		if store.IsDuplicateKey(err) && r.RequestNonce != "" {
			// A retry that was not committed when the first round trip looked is now.
			tx.Rollback()
			o, ok, err := book.LoadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce)
			return s.replay(ctx, r, o, ok, err)
		}
		return OrderResult{}, fmt.Errorf("place order: %w", err)
	}
	return OrderResult{Order: o}, nil
}

// acceptedVar holds a placed order's id in placeResting's transaction, for its order.accepted.
const acceptedVar = "@fx_accepted"

const orderInsertSQL = "INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `price`, `sl`, `tp`, `timeInForce`, " +
	"`expiresAt`, `status`, `requestNonce`, `requestHash`, `fillPrice`, `routeRuleId`, `hedgePercent`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// fillMarket fills a MARKET order through the holder's group commit (committer): its rules run
// on the rows its batch locks, after every write before it in the batch (two orders of one
// account see each other's margin), and it is answered once the batch committed.
func (s *Service) fillMarket(ctx context.Context, userID int64, r OrderRequest, in catalog.Instrument, prof routing.Profile) (OrderResult, error) {
	attrs := []slog.Attr{slog.Int64("account_id", r.AccountID), slog.String("symbol", in.Symbol), slog.String("side", string(r.Side)),
		slog.String("volume", r.Volume.String())}
	if r.RequestNonce != "" {
		attrs = append(attrs, slog.String("request_nonce", r.RequestNonce))
	}
	if s.lease == nil {
		return OrderResult{}, s.gate.Fenced(ctx, gate.Fill, errNoLease, slog.String("op", "fill order"))
	}
	arrived := time.Now()
	w := &marketFill{s: s, Queued: book.NewQueued(ctx, gate.Fill, "fill order", r.AccountID, attrs...), userID: userID, r: r, in: in, profile: prof}
	s.commits.Submit(w)
	switch {
	case w.original != nil:
		return s.replay(ctx, r, *w.original, true, nil)
	case w.Err == nil && w.sending != nil:
		return s.sendOpen(ctx, userID, w.res.Order, in, arrived)
	case errors.Is(w.Err, book.ErrReplayed):
		// A retry that was not committed when its batch looked is now.
		o, ok, err := book.LoadOrderByNonce(ctx, s.db, r.AccountID, r.RequestNonce)
		return s.replay(ctx, r, o, ok, err)
	case w.Err != nil:
		return OrderResult{}, w.Err
	}
	return w.res, nil
}

// marketFill is one MARKET order waiting for its group commit.
// OneTrip: a market fill may go in one round trip on its account's remembered rows.
func (f *marketFill) OneTrip() (string, bool) { return f.r.RequestNonce, true }

type marketFill struct {
	book.Queued
	s      *Service // the desk that queued it (its venue, its links, its log)
	userID int64
	r      OrderRequest
	in     catalog.Instrument
	// profile is the trader's profile as read before the batch, for routing (zero when no rule
	// reads it); rule is the routing rule that routed the order (nil: the group's mode).
	profile routing.Profile
	rule    *int64

	res      OrderResult
	original *book.Order // the order its request nonce already names in the database
	replayOf *marketFill // the write before it in the batch with the same request nonce
	fill     openedFill
	net      *netFill // a NETTING or FIFO account's fill, instead of fill
	a        book.Account
	// sending is the EXTERNAL order this write reserved (SENDING); sendingIdx its id's index.
	sending    *book.Order
	sendingIdx int
}

func (w *marketFill) Wants(l *book.Plan) {
	l.Account(w.Account)
	l.ExposuresOf(w.Account)
	if w.r.RequestNonce != "" {
		l.Nonce(w.Account, w.r.RequestNonce)
	}
}

func (w *marketFill) Apply(r *book.Rows) error {
	w.res, w.original, w.replayOf, w.fill, w.sending = OrderResult{}, nil, nil, openedFill{}, nil
	w.net = nil
	a, found := r.Accounts[w.Account]
	if !found {
		return book.AccountNotFound(w.Account)
	}
	if err := book.OwnedBy(*a, found, w.userID, w.Account); err != nil {
		return err
	}
	key := book.NonceKey{Account: a.ID, Nonce: w.r.RequestNonce}
	if w.r.RequestNonce != "" {
		if made, ok := r.Made[key]; ok {
			prior := made.(*marketFill) // only a market fill writes Made
			if prior.r.fingerprint() != w.r.fingerprint() {
				return errKeyReused(w.r, prior.r, 0)
			}
			w.replayOf = prior
			return nil
		}
		if o, ok := r.Nonces[key]; ok {
			w.original = &o
			return nil
		}
	}
	// After the nonce: a retry of an order that filled before the state changed is answered.
	if err := stateRefusal(*a, actOpen); err != nil {
		return err
	}
	// Priced at the batch's quote, the one every write of the batch sees, under the account
	// group's terms.
	t, _ := termsOf(r.Catalog, a.Group, w.in.Symbol)
	if err := checkOpen(t, w.r.Volume); err != nil {
		return err
	}
	in := t.Instrument
	q, err := r.Market.Tradable(in.Symbol)
	if err != nil {
		return err
	}
	price := book.FillPrice(in, q, w.r.Side)
	ref := q.Bid
	if w.r.Side == fx.Sell {
		ref = q.Ask
	}
	if err := checkStops(in, w.r.Side, ref, w.r.SL, w.r.TP); err != nil {
		return err
	}
	commission, after, net, err := fillCheckMode(r, a, in, w.r.Side, w.r.Volume, price)
	if err != nil {
		return err
	}
	// Routed once, here, on the locked account: the order records the rule that routed it.
	var execution fx.ExecutionMode
	var hedge *int
	execution, w.rule, hedge = routeOf(r.Catalog, a, in.Symbol, w.r.Volume, w.s.profileNow(r.Catalog, a.ID, w.profile))
	if execution == fx.External {
		if net != nil {
			return errModeExternal(a, positionModeOf(r.Catalog, a))
		}
		return w.reserve(r, a, key)
	}
	if err := checkBound(in, w.r.Side, price, w.r.PriceBound); err != nil {
		return err
	}
	o := book.Order{AccountID: a.ID, Symbol: in.Symbol, Side: w.r.Side, Type: fx.Market, Volume: w.r.Volume, SL: w.r.SL, TP: w.r.TP,
		TimeInForce: w.r.TimeInForce, Status: fx.OrderFilled, FillPrice: &price, CreatedAt: r.Now, Execution: fx.Internal, RouteRuleID: w.rule,
		HedgePercent: hedge, PriceBound: w.r.PriceBound}
	if w.r.RequestNonce != "" {
		o.RequestNonce, o.RequestHash = &w.r.RequestNonce, w.r.hash()
	}
	orderVar, _ := r.SessionVar("o")
	insert, args := marketInsert(o)
	r.Writes.Exec(insert, args...)
	r.Writes.Exec(book.SetVarSQL(orderVar, "LAST_INSERT_ID()"))
	if net != nil {
		if w.net, err = w.s.writeNet(r, a, in, o, orderVar, price, net, events.OrderFilled); err != nil {
			return err
		}
	} else if w.fill, err = openPosition(r, a, in, o, orderVar, price, commission, &after, nil, events.OrderFilled, w.s.term()); err != nil {
		return err
	}
	if w.r.RequestNonce != "" {
		r.Made[key] = w
	}
	w.a = *a
	return nil
}

// reserve writes an EXTERNAL order's identity, SENDING, instead of filling it: the venue fills
// it, after this batch committed (Service.sendOpen). Its rules ran on the desk's quote (margin,
// stops), so an order the desk would refuse never reaches the venue.
func (w *marketFill) reserve(r *book.Rows, a *book.Account, key book.NonceKey) error {
	if w.s.venue == nil {
		return fx.Errorf(fx.EUNAVAILABLE, "Account %d trades through an execution venue and none is configured on this desk.", a.ID)
	}
	if !w.s.venue.Reachable() {
		return errVenueUnavailable()
	}
	o := book.Order{AccountID: a.ID, Symbol: w.in.Symbol, Side: w.r.Side, Type: fx.Market, Volume: w.r.Volume, SL: w.r.SL, TP: w.r.TP,
		TimeInForce: w.r.TimeInForce, Status: fx.OrderSending, Execution: fx.External, RouteRuleID: w.rule, CreatedAt: r.Now, PriceBound: w.r.PriceBound}
	if w.r.RequestNonce != "" {
		o.RequestNonce, o.RequestHash = &w.r.RequestNonce, w.r.hash()
	}
	orderVar, idx := r.SessionVar("o")
	r.Writes.Exec("INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `sl`, `tp`, `timeInForce`, `status`, `requestNonce`, "+
		"`requestHash`, `execution`, `routeRuleId`, `sentAt`, `priceBound`) VALUES (?, ?, ?, 'MARKET', ?, ?, ?, ?, 'SENDING', ?, ?, 'EXTERNAL', ?, NOW(3), ?)",
		o.AccountID, o.Symbol, o.Side, o.Volume, o.SL, o.TP, o.TimeInForce, o.RequestNonce, o.RequestHash, o.RouteRuleID, o.PriceBound)
	r.Writes.Exec(book.SetVarSQL(orderVar, "LAST_INSERT_ID()"))
	w.sending, w.sendingIdx = &o, idx
	if w.r.RequestNonce != "" {
		r.Made[key] = w
	}
	w.a = *a
	return nil
}

func (w *marketFill) Committed(r *book.Rows, ids *book.IDs) []risk.Change {
	switch {
	case w.original != nil:
		return nil
	case w.sending != nil:
		w.sending.ID = ids.Values[w.sendingIdx]
		w.res = OrderResult{Order: *w.sending}
		return nil
	case w.replayOf != nil:
		// Answered with the order the same nonce opened earlier in this batch.
		w.res = OrderResult{Order: w.replayOf.res.Order, Position: w.replayOf.res.Position, Replayed: true}
		return nil
	}
	if w.net != nil {
		o, p, d, changes := w.net.committed(r, ids, w.a)
		w.res = OrderResult{Order: o, Position: p, Commission: d}
		return changes
	}
	p, d := w.fill.written(r, ids)
	o := w.fill.order
	o.ID, o.PositionID = p.OrderID, &p.ID
	w.res = OrderResult{Order: o, Position: &p, Commission: d}
	return []risk.Change{positionOpened(p), balanceChanged(w.a)}
}

func (w *marketFill) Failed(err error) error {
	if store.IsDuplicateKey(err) && w.r.RequestNonce != "" {
		return book.ErrReplayed
	}
	return fmt.Errorf("fill order: %w", err)
}

// fillCheck prices a fill of volume lots on side at price for the locked account a, whose open
// positions sum to exps: the commission it costs and the account's metrics after it; in carries
// the account group's terms (termsOf), so the commission is the group's. It
// refuses (ECONFLICT) a fill that increases margin while the account is below its margin-call
// level or beyond its free margin.
func fillCheck(m *book.Market, cat *catalog.Catalog, in catalog.Instrument, a book.Account, exps []book.Exposure, side fx.Side, volume, price decimal.Decimal) (decimal.Decimal, book.Metrics, error) {
	commission := decimal.Zero
	if in.Group.CommissionPerLot.IsPositive() {
		c, ok := m.Convert(in.Group.CommissionPerLot.Mul(volume), in.Group.CommissionCurrency, a.Currency)
		if !ok {
			return decimal.Zero, book.Metrics{}, book.ErrPricing()
		}
		commission = c
	}
	g := cat.AccountGroup(a.Group)
	before, ok := m.Metrics(a, g, a.Balance, exps)
	if !ok {
		return decimal.Zero, book.Metrics{}, book.ErrPricing()
	}
	after, ok := m.Metrics(a, g, a.Balance.Sub(commission), append(exps, book.Exposure{Symbol: in.Symbol, Side: side, Volume: volume, VolumePrice: volume.Mul(price)}))
	if !ok {
		return decimal.Zero, book.Metrics{}, book.ErrPricing()
	}
	if after.UsedMargin.GreaterThan(before.UsedMargin) {
		if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
			return decimal.Zero, book.Metrics{}, fx.Errorf(fx.ECONFLICT, "Orders that increase margin are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
				before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
		}
		if after.FreeMargin.IsNegative() {
			return decimal.Zero, book.Metrics{}, fx.Errorf(fx.ECONFLICT, "Not enough free margin: this order needs %s %s of margin and free margin would be %s %s.",
				fx.FormatMoney(a.Currency, after.UsedMargin.Sub(before.UsedMargin)), a.Currency, fx.FormatMoney(a.Currency, after.FreeMargin), a.Currency)
		}
	}
	return commission, after, nil
}

// openedFill is a fill's writes in a batch: the order it fills, the position it opens and its
// commission deal, whose ids the batch reads back.
type openedFill struct {
	order          book.Order
	pos            book.Position
	orderID, posID int // indexes of the session variables holding their ids (batchIDs.values)
	deal           int // the commission deal's index in the batch, or -1
}

// written is the fill's position and commission deal as committed, with their ids.
func (f openedFill) written(r *book.Rows, ids *book.IDs) (book.Position, *book.Deal) {
	p := f.pos
	p.ID, p.OrderID = ids.Values[f.posID], ids.Values[f.orderID]
	if f.deal < 0 {
		return p, nil
	}
	d := r.DealAt(f.deal, ids)
	d.OrderID, d.PositionID, d.IDsFrom = &p.OrderID, &p.ID, nil
	d.IdempotencyKey += itoa(p.OrderID)
	return p, &d
}

// openPosition adds to the batch, after the statements that set orderVar to the filled order
// o's id, the position o opens at price on the locked account a, its commission deal and the
// account's new marks (after; nil leaves the stored ones). It is the one ledger path of every fill: a MARKET submit and a
// resting order the risk engine triggers. The account's balance and exposures move at once, so
// the next write in the batch sees them.
//
// fromVenue, when set, is the venue trade an EXTERNAL fill opened: the position's link row,
// which the batch's fence admits only while this process holds the term, and the venue's open
// time, which is the position's openedAt (otherwise the database's clock at the write).
//
// The fill's events go in with it: orderEvent (order.filled, order.triggered) of o and
// position.opened, written by this process's lease term.
func openPosition(r *book.Rows, a *book.Account, in catalog.Instrument, o book.Order, orderVar string, price, commission decimal.Decimal, after *book.Metrics, fromVenue *venueOpen,
	orderEvent events.Type, term int64) (openedFill, error) {
	lots := filledLots(o) // an IOC's part at the venue, else the order's volume
	f := openedFill{order: o, deal: -1, pos: book.Position{AccountID: a.ID, Symbol: in.Symbol, Side: o.Side, Volume: lots, OpenVolume: lots,
		OpenPrice: price, SL: o.SL, TP: o.TP, Commission: commission, RealizedProfit: decimal.Zero, Status: fx.PositionOpen, OpenedAt: r.Now,
		Currency: a.Currency}}
	var openedAt any // nil: the database's clock
	if fromVenue != nil {
		link := fromVenue.tradeID
		f.pos.VenueTradeID = &link
		if !fromVenue.openedAt.IsZero() {
			// As the column keeps it (milliseconds), so that the event and the row agree.
			f.pos.OpenedAt = fromVenue.openedAt.UTC().Truncate(time.Millisecond)
			openedAt = f.pos.OpenedAt
		}
	}
	f.orderID = r.IDs.Index(orderVar)
	posVar, posIdx := r.SessionVar("p")
	f.posID = posIdx
	p := f.pos
	// The opening fill's markup, recorded with it for the dealer's P&L (docs/pnl.md).
	markup := r.Market.Markup(in, lots, a.Currency)
	// A HEDGE order's percent goes with its position: the holder's hedge rules find the
	// positions still to hedge by it (internal/hedge.Rules).
	r.Writes.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `venueTradeId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, "+
		"`sl`, `tp`, `commission`, `markup`, `openedAt`, `hedgePercent`) VALUES (?, "+orderVar+", ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE(?, NOW(3)), ?)",
		p.AccountID, p.VenueTradeID, p.Symbol, p.Side, p.Volume, p.OpenVolume, p.OpenPrice, p.SL, p.TP, p.Commission, markup, openedAt, o.HedgePercent)
	r.Writes.Exec(book.SetVarSQL(posVar, "LAST_INSERT_ID()"))
	filled := o
	filled.PositionID = new(int64)
	// orderEvent "": the caller writes the order's event (a NETTING or FIFO fill, netting.go).
	if err := addOrderEvent(r, a, orderEvent, filled, orderVar, posVar, term); err != nil {
		return openedFill{}, err
	}
	if err := events.Add(&r.Writes, events.Event{AccountID: a.ID, UserID: a.UserID, Type: events.PositionOpened, Payload: events.PositionOf(p), Term: term,
		FromSession: []events.SessionField{{Field: "id", Var: posVar}, {Field: "orderId", Var: orderVar}}}); err != nil {
		return openedFill{}, err
	}
	if commission.IsPositive() {
		side, sym, vol := o.Side, in.Symbol, lots
		f.deal = r.Post(a, book.Deal{Type: fx.DealCommission, Amount: commission.Neg(), Symbol: &sym, Side: &side, Volume: &vol, Price: &price,
			IdempotencyKey: "commission:order:", Comment: "commission at open", IDsFrom: &ledger.SessionIDs{Order: orderVar, Position: posVar}})
	}
	if after != nil {
		r.Marks[a.ID] = *after
	}
	r.Expose(a.ID, in.Symbol, o.Side, lots, lots.Mul(price))
	return f, nil
}

// checkOrderShape checks the fields that depend on the order type and returns the expiry.
func (s *Service) checkOrderShape(in catalog.Instrument, r *OrderRequest) (*time.Time, error) {
	if r.TimeInForce == "" {
		r.TimeInForce = fx.GTC
	}
	if err := checkLimitShape(in, r); err != nil {
		return nil, err
	}
	if r.Type == fx.Market {
		if r.Price != nil {
			return nil, fx.Errorf(fx.EINVALID, "A MARKET order takes no price; it fills at the desk's quote.")
		}
		return nil, checkMarketPolicy(in, r)
	}
	if err := checkRestingPolicy(r); err != nil {
		return nil, err
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

// Orders lists a page of userID's orders, newest first (f.Limit clamped to maxList).
func (s *Service) Orders(ctx context.Context, userID int64, f book.ListFilter) ([]book.Order, error) {
	f.Limit = clampLimit(f.Limit)
	return book.ListOrders(ctx, s.db, userID, f)
}

// CancelOrder cancels a PENDING order of userID (ECONFLICT once it filled, expired or was
// cancelled). It moves no money, so it needs no price and no fence.
func (s *Service) CancelOrder(ctx context.Context, userID, id int64) (book.Order, error) {
	o, err := book.LoadOrder(ctx, s.db, userID, id)
	if err != nil {
		return book.Order{}, err
	}
	if userID != 0 {
		// A trader's cancel: a DISABLED account is read-only. Read unlocked: a cancel moves no
		// money, and a state set while it runs is one the cancel may precede.
		a, err := book.LoadAccount(ctx, s.db, userID, o.AccountID)
		if err != nil {
			return book.Order{}, err
		}
		if err := stateRefusal(a, actCancel); err != nil {
			return book.Order{}, err
		}
	}
	if o.OCOOrderID != nil {
		return s.cancelOCO(ctx, userID, o) // one leg's cancel cancels the pair (oco.go)
	}
	var n int64
	err = s.retry(ctx, func() error {
		// order.cancelled goes in with the change.
		n, err = s.changeOne(ctx, fmt.Sprintf("cancel order %d", id), func(tx *sql.Tx) (events.Event, error) {
			return s.orderEvent(ctx, tx, events.OrderCancelled, id)
		}, "UPDATE `fx_order` SET `status` = 'CANCELLED' WHERE `id` = ? AND `status` = 'PENDING'", id)
		return err
	})
	if err != nil {
		return book.Order{}, err
	}
	if n == 0 {
		o, _ = book.LoadOrder(ctx, s.db, userID, id)
		return book.Order{}, fx.Errorf(fx.ECONFLICT, "Order %d is %s and can no longer be cancelled.", id, o.Status)
	}
	s.notify(ctx, risk.Change{Kind: risk.OrderCancelled, Order: risk.Order{ID: id}})
	return book.LoadOrder(ctx, s.db, userID, id)
}
