package trading

import (
	"context"
	"database/sql"
	"errors"
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

// Lease is the term fence that ends a fenced write's own transaction (*lease.Keeper). The fence
// statement must fail, so that the COMMIT after it does not run, when the term is not held;
// lease.IsFenced recognises that error.
type Lease interface {
	FenceStatement() (string, []any, error)
}

// Gate admits or drops lease-guarded work (*gate.Gate). Both methods return an error matching
// gate.ErrNotHolder when the work is not executed.
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
	Fenced(ctx context.Context, w gate.Work, cause error, attrs ...slog.Attr) error
}

// Service applies the trading rules. Its methods return *fx.Error values a client may see
// (EINVALID, ENOTFOUND, ECONFLICT, EUNAVAILABLE) and wrapped internal errors otherwise.
type Service struct {
	db       *sql.DB
	prices   Prices
	lease    Lease // nil where the gate never admits (the cron process)
	gate     Gate
	log      *slog.Logger
	catalog  *catalogCache
	now      func() time.Time
	onChange func(context.Context, ...risk.Change)
}

// Config builds a Service.
type Config struct {
	DB     *sql.DB
	Prices Prices
	Lease  Lease // the fence; nil only where Gate never admits (fxdesk-cron)
	Gate   Gate  // required
	Log    *slog.Logger
	Now    func() time.Time // default time.Now
	// OnChange, when set, receives every change this service commits, after the commit and
	// only then, with the changes of one transaction in one call (the risk engine's Apply). It
	// must not block: it runs on the request's goroutine.
	OnChange func(context.Context, ...risk.Change)
}

// New returns a service; it refuses a missing dependency.
func New(c Config) (*Service, error) {
	switch {
	case c.DB == nil:
		return nil, errors.New("trading service: DB is required")
	case c.Prices == nil:
		return nil, errors.New("trading service: Prices is required")
	case c.Gate == nil:
		return nil, errors.New("trading service: Gate is required")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: c.DB, prices: c.Prices, lease: c.Lease, gate: c.Gate, log: c.Log, now: c.Now, onChange: c.OnChange,
		catalog: &catalogCache{db: c.DB, maxAge: 5 * time.Second}}, nil
}

// maxList caps every list answer.
const maxList = 500

func clampLimit(n int) int {
	if n <= 0 || n > maxList {
		return maxList
	}
	return n
}

// begin opens a fenced write's transaction, after the gate, and returns its first batch: add
// the row locks and reads, then send it with tx.lock. The fence itself is sent by commit, as
// the statement just before COMMIT (see txn), so it costs no round trip of its own and holds
// its shared lock on the lease row only while the transaction commits.
func (s *Service) begin(ctx context.Context, work gate.Work, what string) (*txn, *batch, error) {
	if err := s.gate.Admit(ctx, work, slog.String("op", what)); err != nil {
		return nil, nil, err
	}
	if s.lease == nil {
		return nil, nil, s.gate.Fenced(ctx, work, errors.New("this process has no lease to fence with"), slog.String("op", what))
	}
	stmt, args, err := s.lease.FenceStatement()
	if err == nil && stmt == "" {
		err = errors.New("the lease gave no fence statement") // "" would make the write unfenced
	}
	if err != nil {
		return nil, nil, s.gate.Fenced(ctx, work, err, slog.String("op", what))
	}
	b := &batch{}
	t, err := beginTxn(ctx, s.db, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: begin: %w", what, err)
	}
	t.fence, t.fenceArgs = stmt, args
	t.refused = func(cause error) error {
		return s.gate.Fenced(ctx, work, cause, slog.String("op", what), slog.Bool("rolled_back", true))
	}
	return t, b, nil
}

// beginUnfenced is begin for a balance change that does not depend on this process's prices:
// no gate, no fence.
func (s *Service) beginUnfenced(ctx context.Context, what string) (*txn, *batch, error) {
	b := &batch{}
	t, err := beginTxn(ctx, s.db, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: begin: %w", what, err)
	}
	return t, b, nil
}

func (c *catalog) accountGroup(name string) AccountGroup {
	if g, ok := c.accountGroups[name]; ok {
		return g
	}
	return AccountGroup{Name: name, LeverageMax: 500, MarginCallLevel: hundred, StopOutLevel: decimal.NewFromInt(50)}
}

// ---- accounts ----

// CreateAccount opens an account for userID in a fiat currency (fx.CheckAccountCurrency) that
// the USD hub can convert: an account the desk cannot mark could never trade.
func (s *Service) CreateAccount(ctx context.Context, userID int64, currency string, leverage int) (Account, error) {
	if err := fx.CheckAccountCurrency(currency); err != nil {
		return Account{}, err
	}
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return Account{}, err
	}
	if !cat.currencies[currency] {
		return Account{}, fx.Errorf(fx.EINVALID, "%s accounts are not offered: no instrument converts %s to USD.", currency, currency)
	}
	g := cat.accountGroup("default")
	if leverage < 1 || leverage > g.LeverageMax {
		return Account{}, fx.Errorf(fx.EINVALID, "leverage must be a whole number from 1 to %d.", g.LeverageMax)
	}
	res, err := s.db.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `accountGroup`, `currency`, `leverage`) VALUES (?, ?, ?, ?)",
		userID, g.Name, currency, leverage)
	if err != nil {
		return Account{}, fmt.Errorf("create account: %w", err)
	}
	id, _ := res.LastInsertId()
	a, err := loadAccount(ctx, s.db, userID, id)
	if err == nil {
		s.notify(ctx, accountUpserted(a, cat.accountGroup(a.Group)))
	}
	return a, err
}

// Accounts lists userID's accounts (userID 0: every account, for admins).
func (s *Service) Accounts(ctx context.Context, userID int64, limit int) ([]Account, error) {
	return listAccounts(ctx, s.db, userID, clampLimit(limit))
}

// AccountView is an account with its metrics; Live is false when they are the stored marks
// because some open position cannot be priced here.
type AccountView struct {
	Account
	Metrics
	Live bool
}

// Account returns userID's account id with live metrics where this process can price them.
func (s *Service) Account(ctx context.Context, userID, id int64) (AccountView, error) {
	a, err := loadAccount(ctx, s.db, userID, id)
	if err != nil {
		return AccountView{}, err
	}
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return AccountView{}, err
	}
	exps, err := loadExposures(ctx, s.db, a.ID)
	if err != nil {
		return AccountView{}, err
	}
	if m, ok := newMarket(s.prices, cat).metrics(a, cat.accountGroup(a.Group), a.Balance, exps); ok {
		return AccountView{Account: a, Metrics: m, Live: true}, nil
	}
	return AccountView{Account: a, Metrics: a.StoredMetrics()}, nil
}

// Deposit credits amount to account id (admin). A repeated requestNonce returns the first deal.
func (s *Service) Deposit(ctx context.Context, id int64, amount decimal.Decimal, nonce string) (Deal, bool, error) {
	key := "deposit:" + itoa(id) + ":" + nonceOrRandom(nonce)
	tx, locks, err := s.beginUnfenced(ctx, "deposit")
	if err != nil {
		return Deal{}, false, err
	}
	defer tx.Rollback()
	var a Account
	var prior Deal
	var found, seen bool
	locks.query(rowInto(&a, &found, scanAccount), lockAccountSQL, id)
	locks.query(rowInto(&prior, &seen, scanDeal), dealByKeySQL, key)
	if err := tx.lock(ctx, locks, "deposit"); err != nil {
		return Deal{}, false, err
	}
	if err := ownedBy(a, found, 0, id); err != nil {
		return Deal{}, false, err
	}
	if err := checkAmount(a.Currency, amount); err != nil {
		return Deal{}, false, err
	}
	if seen {
		return prior, true, nil
	}
	d, err := commitDeal(ctx, tx, &batch{}, &a, Deal{Type: fx.DealDeposit, Amount: amount, IdempotencyKey: key, Comment: "deposit"}, nil)
	if err != nil {
		return Deal{}, false, err
	}
	s.notify(ctx, balanceChanged(a))
	return d, false, nil
}

// Withdraw debits amount from userID's account id. With open positions it needs live metrics
// (this process must price every position) and refuses below the margin-call level or beyond
// free margin. A repeated requestNonce returns the first deal.
func (s *Service) Withdraw(ctx context.Context, userID, id int64, amount decimal.Decimal, nonce string) (Deal, bool, error) {
	acct, err := loadAccount(ctx, s.db, userID, id)
	if err != nil {
		return Deal{}, false, err
	}
	if err := checkAmount(acct.Currency, amount); err != nil {
		return Deal{}, false, err
	}
	key := "withdraw:" + itoa(id) + ":" + nonceOrRandom(nonce)
	if nonce != "" {
		if d, ok, err := loadDealByKey(ctx, s.db, key); err != nil || ok {
			return d, ok, err
		}
	}
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return Deal{}, false, err
	}
	exps, err := loadExposures(ctx, s.db, id)
	if err != nil {
		return Deal{}, false, err
	}
	var tx *txn
	var locks *batch
	unpriceable := func(err error) error {
		if fx.ErrorCode(err) == fx.EUNAVAILABLE {
			return fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		return err
	}
	if len(exps) > 0 {
		// Free margin depends on this process's prices: the write is fenced like a fill.
		if _, ok := newMarket(s.prices, cat).metrics(acct, cat.accountGroup(acct.Group), acct.Balance, exps); !ok {
			return Deal{}, false, fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		if tx, locks, err = s.begin(ctx, gate.Withdrawal, "withdrawal"); err != nil {
			return Deal{}, false, unpriceable(err)
		}
	} else if tx, locks, err = s.beginUnfenced(ctx, "withdrawal"); err != nil {
		return Deal{}, false, err
	}
	defer tx.Rollback()
	var a Account
	var prior Deal
	var found, seen bool
	locks.query(rowInto(&a, &found, scanAccount), lockAccountSQL, id)
	locks.query(rowInto(&prior, &seen, scanDeal), dealByKeySQL, key)
	locks.query(exposuresInto(&exps), exposuresSQL, id)
	if err := tx.lock(ctx, locks, "withdrawal"); err != nil {
		return Deal{}, false, err
	}
	if err := ownedBy(a, found, userID, id); err != nil {
		return Deal{}, false, err
	}
	if seen {
		return prior, true, nil
	}
	if amount.GreaterThan(a.Balance) {
		return Deal{}, false, fx.Errorf(fx.ECONFLICT, "Insufficient funds: the balance is %s %s.", fx.FormatMoney(a.Currency, a.Balance), a.Currency)
	}
	var marks *Metrics
	if len(exps) > 0 {
		g := cat.accountGroup(a.Group)
		m := newMarket(s.prices, cat)
		before, ok := m.metrics(a, g, a.Balance, exps)
		if !ok {
			return Deal{}, false, fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
			return Deal{}, false, fx.Errorf(fx.ECONFLICT, "Withdrawals are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
				before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
		}
		if amount.GreaterThan(before.FreeMargin) {
			return Deal{}, false, fx.Errorf(fx.ECONFLICT, "Insufficient free margin: at most %s %s can be withdrawn while positions are open.",
				fx.FormatMoney(a.Currency, decimal.Max(before.FreeMargin, decimal.Zero)), a.Currency)
		}
		after, _ := m.metrics(a, g, a.Balance.Sub(amount), exps)
		marks = &after
	}
	d, err := commitDeal(ctx, tx, &batch{}, &a, Deal{Type: fx.DealWithdrawal, Amount: amount.Neg(), IdempotencyKey: key, Comment: "withdrawal"}, marks)
	if err != nil {
		return Deal{}, false, unpriceable(err)
	}
	s.notify(ctx, balanceChanged(a))
	return d, false, nil
}

// checkAmount checks a deposit or withdrawal in an account's currency: positive, within the
// currency's minor units (whole yen, cents, fils), not absurdly large.
func checkAmount(currency string, a decimal.Decimal) error {
	if !a.IsPositive() {
		return fx.Errorf(fx.EINVALID, "amount must be positive.")
	}
	if err := fx.CheckMoney("amount", currency, a); err != nil {
		return err
	}
	if a.GreaterThan(decimal.New(1, 15)) {
		return fx.Errorf(fx.EINVALID, "amount is too large.")
	}
	return nil
}

func nonceOrRandom(n string) string {
	if n != "" {
		return "n:" + n
	}
	return "r:" + randomID()
}

// Deals lists userID's ledger, newest first (accountID 0: every account of the user).
func (s *Service) Deals(ctx context.Context, userID, accountID int64, limit int) ([]Deal, error) {
	return listDeals(ctx, s.db, userID, accountID, clampLimit(limit))
}

// ---- orders ----

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

// ---- positions ----

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
