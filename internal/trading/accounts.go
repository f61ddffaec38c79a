package trading

import (
	"context"
	"fmt"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// Open opens an account for userID in a fiat currency (fx.CheckAccountCurrency) that
// the USD hub can convert: an account the desk cannot mark could never trade. A user holds at
// most Settings.MaxAccountsPerUser accounts (ECONFLICT past it).
func (acs *Accounts) Open(ctx context.Context, userID int64, currency string, leverage int) (book.Account, error) {
	s := acs.s
	if err := fx.CheckAccountCurrency(currency); err != nil {
		return book.Account{}, err
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return book.Account{}, err
	}
	if !cat.Currencies[currency] {
		return book.Account{}, fx.Errorf(fx.EINVALID, "%s accounts are not offered: no instrument converts %s to USD.", currency, currency)
	}
	g := cat.AccountGroup("default")
	if leverage < 1 || leverage > g.LeverageMax {
		return book.Account{}, fx.Errorf(fx.EINVALID, "leverage must be a whole number from 1 to %d.", g.LeverageMax)
	}
	var id int64
	if err := s.retry(ctx, func() (err error) {
		id, err = s.insertAccount(ctx, userID, g.Name, currency, leverage)
		return err
	}); err != nil {
		return book.Account{}, err
	}
	a, err := book.LoadAccount(ctx, s.db, userID, id)
	if err == nil {
		s.notify(ctx, accountUpserted(a, cat.AccountGroup(a.Group)))
	}
	return a, err
}

// insertAccount is CreateAccount's transaction. It locks the user's accounts — and, through the
// user index, the gap a new one would go in — before counting them, so two creations racing for
// the last place are serialised and the second counts the first. Two creations of a user's first
// account both lock the same empty gap and deadlock on their INSERTs: the server rolls one back
// and retry runs it again, when it counts the other's.
func (s *Service) insertAccount(ctx context.Context, userID int64, group, currency string, leverage int) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("create account: begin: %w", err)
	}
	defer tx.Rollback()
	ids, err := store.QueryAll(ctx, tx, "create account: count accounts", store.ScanInt64,
		"SELECT `id` FROM `fx_account` WHERE `userId` = ? FOR UPDATE", userID)
	if err != nil {
		return 0, err
	}
	if held, limit := len(ids), s.settings.MaxAccountsPerUser(); held >= limit {
		return 0, fx.Errorf(fx.ECONFLICT, "You already hold %d accounts, the most one user may open (setting %s = %d).",
			held, catalog.SettingMaxAccountsPerUser, limit)
	}
	// A new account is swap-free when its group's default says so. Read apart from the INSERT:
	// an INSERT … SELECT would take the table's AUTO-INC lock for the statement, which the
	// creations racing above would wait on.
	var swapFree bool
	if err := tx.QueryRowContext(ctx, "SELECT `swapFreeDefault` FROM `fx_account_group` WHERE `name` = ?", group).Scan(&swapFree); err != nil {
		return 0, fmt.Errorf("create account: account group %s: %w", group, err)
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `accountGroup`, `currency`, `leverage`, `swapFree`) VALUES (?, ?, ?, ?, ?)",
		userID, group, currency, leverage, swapFree)
	if err != nil {
		return 0, fmt.Errorf("create account: %w", err)
	}
	id, _ := res.LastInsertId()
	if err := store.Commit(tx); err != nil {
		return 0, fmt.Errorf("create account: commit: %w", err)
	}
	return id, nil
}

// List lists userID's accounts (userID 0: every account, for admins).
func (acs *Accounts) List(ctx context.Context, userID int64, limit int) ([]book.Account, error) {
	s := acs.s
	return book.ListAccounts(ctx, s.db, userID, clampLimit(limit))
}

// Page lists a page of every user's accounts, newest first (for admins; limit clamped to
// maxList).
func (acs *Accounts) Page(ctx context.Context, before int64, limit int) ([]book.Account, error) {
	return book.PageAccounts(ctx, acs.s.db, before, clampLimit(limit))
}

// AccountView is an account with its metrics, as every read shows them (the list, the single
// read, the admin list, a new account). Live is true when they are worked out now at this
// process's prices — always so for an account without open positions, whose equity is its
// balance. Otherwise they are the stored marks (Account.MarkedAt says when), and Marked is false
// when there are none: the account was never marked, and its figures are unknown rather than
// zero.
type AccountView struct {
	book.Account
	book.Metrics
	Live   bool
	Marked bool
}

// View returns userID's account id with its metrics (Views).
func (acs *Accounts) View(ctx context.Context, userID, id int64) (AccountView, error) {
	a, err := book.LoadAccount(ctx, acs.s.db, userID, id)
	if err != nil {
		return AccountView{}, err
	}
	vs, err := acs.Views(ctx, []book.Account{a})
	if err != nil {
		return AccountView{}, err
	}
	return vs[0], nil
}

// Views marks accounts as View marks one: live where this process can price every open
// position, else the stored marks. The open positions of all of them are read in one statement.
func (acs *Accounts) Views(ctx context.Context, accounts []book.Account) ([]AccountView, error) {
	s := acs.s
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	exps, err := book.LoadExposuresOf(ctx, s.db, ids)
	if err != nil {
		return nil, err
	}
	market := book.NewMarket(s.prices, cat)
	out := make([]AccountView, len(accounts))
	for i, a := range accounts {
		if m, ok := market.Metrics(a, cat.AccountGroup(a.Group), a.Balance, exps[a.ID]); ok {
			out[i] = AccountView{Account: a, Metrics: m, Live: true, Marked: true}
			continue
		}
		m, marked := a.StoredMetrics()
		out[i] = AccountView{Account: a, Metrics: m, Marked: marked}
	}
	return out, nil
}

// AccountPrices prices feed quotes for one account as its fills are priced: a sell fills at the
// bid it shows and a buy at the ask, its group's effective markup (termsOf) already in both.
type AccountPrices struct {
	cat   *catalog.Catalog
	group string
}

// Prices returns the prices of userID's account id (userID 0: any owner's; ENOTFOUND for an
// account that is not the caller's or does not exist).
func (acs *Accounts) Prices(ctx context.Context, userID, id int64) (AccountPrices, error) {
	s := acs.s
	a, err := book.LoadAccount(ctx, s.db, userID, id)
	if err != nil {
		return AccountPrices{}, err
	}
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return AccountPrices{}, err
	}
	return AccountPrices{cat: cat, group: a.Group}, nil
}

// Quote is q on symbol as the account trades it: bid − markup and ask + markup (book.FillPrice
// of a sell and of a buy). ok is false for a symbol the catalog does not know.
func (p AccountPrices) Quote(symbol string, q tick.Quote) (bid, ask decimal.Decimal, ok bool) {
	t, ok := termsOf(p.cat, p.group, symbol)
	if !ok {
		return decimal.Decimal{}, decimal.Decimal{}, false
	}
	bq := book.TickQuote(t.Instrument, q)
	return book.FillPrice(t.Instrument, bq, fx.Sell), book.FillPrice(t.Instrument, bq, fx.Buy), true
}

// Deposit credits amount to account id (admin). A repeated requestNonce returns the first deal;
// one that came with another amount is refused (EKEYREUSED). The deposit is one audit row
// (account.deposit) by ctx's actor, in the deal's transaction; a replay records none. It is made
// at once whatever its amount: the four-eyes threshold is Finance.Deposit's.
func (acs *Accounts) Deposit(ctx context.Context, id int64, amount decimal.Decimal, nonce string) (book.Deal, bool, error) {
	s := acs.s
	m := move{key: depositKey(id, nonce), nonce: nonce, action: "account.deposit"}
	return s.balanceChange(ctx, func() (book.Deal, book.Account, bool, error) { return s.deposit(ctx, id, amount, m) })
}

// depositKey is the idempotency key of a deposit made at once.
func depositKey(id int64, nonce string) string {
	return "deposit:" + itoa(id) + ":" + nonceOrRandom(nonce)
}

// move is what a deposit's or a withdrawal's transaction writes beside its deal: the deal's
// idempotency key, the requestNonce bound to its amount ("" for none), and its audit row — a
// staff change's (action: account.deposit, account.withdraw), or the approval of the money
// request the deal carries out (approval) — or none, for a trader's own withdrawal.
type move struct {
	key, nonce string
	action     string
	approval   *approval
}

// record adds m's audit row to b, ahead of the posting (whose deal INSERT must stay last: its id
// is the batch's last insert id): the locked account a's balance before and after signed (the
// deal's amount), or the request before and after its approval. A replay never gets here.
func (m move) record(ctx context.Context, b *book.Batch, a book.Account, signed decimal.Decimal) error {
	var c audit.Change
	switch {
	case m.approval != nil:
		c = m.approval.change(a, signed, m.key)
	case m.action != "":
		after := balanceRecord{Balance: fx.FormatMoney(a.Currency, a.Balance.Add(signed)), Currency: a.Currency, IdempotencyKey: m.key}
		if signed.IsNegative() {
			after.Withdrawn = fx.FormatMoney(a.Currency, signed.Neg())
		} else {
			after.Deposited = fx.FormatMoney(a.Currency, signed)
		}
		c = audit.Change{Action: m.action, EntityType: "account", EntityID: itoa(a.ID),
			Before: balanceRecord{Balance: fx.FormatMoney(a.Currency, a.Balance), Currency: a.Currency}, After: after}
	default:
		return nil
	}
	stmt, args, err := audit.Row(ctx, c)
	if err != nil {
		return err
	}
	b.Exec(stmt, args...)
	return nil
}

// naming is what records the new deal's id beside it (book.CommitDeal): an approval's request
// row; nil for every other move.
func (m move) naming() func(*book.Batch) {
	if m.approval == nil {
		return nil
	}
	return m.approval.approved
}

// balanceChange runs a deposit's or a withdrawal's transaction, retried whole on a deadlock,
// and tells the risk engine about the account it left unless it was a replay.
func (s *Service) balanceChange(ctx context.Context, txn func() (book.Deal, book.Account, bool, error)) (book.Deal, bool, error) {
	var d book.Deal
	var a book.Account
	var replayed bool
	if err := s.retry(ctx, func() (err error) {
		d, a, replayed, err = txn()
		return err
	}); err != nil {
		return book.Deal{}, false, err
	}
	if !replayed {
		s.notify(ctx, balanceChanged(a))
	}
	return d, replayed, nil
}

// deposit is a deposit's transaction on account id, as m records it; a is the account after it.
func (s *Service) deposit(ctx context.Context, id int64, amount decimal.Decimal, m move) (book.Deal, book.Account, bool, error) {
	tx, locks, err := s.beginUnfenced(ctx, "deposit")
	if err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	defer tx.Rollback()
	var a book.Account
	var prior book.Deal
	var found, seen bool
	locks.Query(book.RowInto(&a, &found, book.ScanAccount), book.LockAccountSQL, id)
	locks.Query(book.RowInto(&prior, &seen, book.ScanDeal), book.DealByKeySQL, m.key)
	m.approval.lock(locks)
	if err := tx.Lock(ctx, locks, "deposit"); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if err := book.OwnedBy(a, found, 0, id); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if err := checkAmount(a.Currency, amount); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if seen {
		return prior, a, true, amountBound(prior, amount, m.nonce)
	}
	if err := m.approval.check(); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	b := &book.Batch{}
	if err := m.record(ctx, b, a, amount); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if err := events.Add(b, balanceEvent(a, events.Deposit, fx.DealDeposit, amount, m.key, "deposit", s.term())); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	d, err := book.CommitDeal(ctx, tx, b, &a, book.Deal{Type: fx.DealDeposit, Amount: amount, IdempotencyKey: m.key, Comment: "deposit"}, nil, m.naming())
	if err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	return d, a, false, nil
}

// balanceEvent is the event of a deposit or a withdrawal of amount (signed as its deal's) on the
// locked account a, before the deal moves its balance. It goes in the deal's batch ahead of the
// posting, whose deal INSERT stays last.
func balanceEvent(a book.Account, t events.Type, deal fx.DealType, amount decimal.Decimal, key, comment string, term int64) events.Event {
	return events.Event{AccountID: a.ID, UserID: a.UserID, Type: t, Term: term, Payload: events.BalanceOf(book.Deal{AccountID: a.ID, Type: deal,
		Amount: amount, BalanceAfter: a.Balance.Add(amount), Currency: a.Currency, IdempotencyKey: key, Comment: comment})}
}

// balanceRecord is what the audit log records of a staff deposit or withdrawal: the account's
// balance before and after it, and after it the amount and the deal's idempotency key.
type balanceRecord struct {
	Balance        string `json:"balance"`
	Currency       string `json:"currency"`
	Deposited      string `json:"deposited,omitempty"`
	Withdrawn      string `json:"withdrawn,omitempty"`
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// Withdraw debits amount from userID's account id. With open positions it needs live metrics
// (this process must price every position) and refuses below the margin-call level or beyond
// free margin. A repeated requestNonce returns the first deal; one that came with another amount
// is refused (EKEYREUSED).
func (acs *Accounts) Withdraw(ctx context.Context, userID, id int64, amount decimal.Decimal, nonce string) (book.Deal, bool, error) {
	return acs.s.withdrawal(ctx, userID, id, amount, move{key: "withdraw:" + itoa(id) + ":" + nonceOrRandom(nonce), nonce: nonce})
}

// withdrawal debits amount from account id, userID's (0: any owner's, for desk staff), as m
// records it: a trader's own withdrawal, a staff withdrawal or an approved request's.
func (s *Service) withdrawal(ctx context.Context, userID, id int64, amount decimal.Decimal, m move) (book.Deal, bool, error) {
	acct, err := book.LoadAccount(ctx, s.db, userID, id)
	if err != nil {
		return book.Deal{}, false, err
	}
	if err := checkAmount(acct.Currency, amount); err != nil {
		return book.Deal{}, false, err
	}
	if m.nonce != "" {
		if d, ok, err := book.LoadDealByKey(ctx, s.db, m.key); err != nil || ok {
			if err == nil {
				err = amountBound(d, amount.Neg(), m.nonce)
			}
			return d, ok && err == nil, err
		}
	}
	return s.balanceChange(ctx, func() (book.Deal, book.Account, bool, error) {
		return s.withdraw(ctx, userID, id, acct, amount, m)
	})
}

// withdraw is a withdrawal's transaction on account id, read unlocked as acct; a is the account
// after it. The account's state refuses a trader's own withdrawal (userID set) only: desk staff
// may pay out of a CLOSE_ONLY or DISABLED account, as a dealer may close on it.
func (s *Service) withdraw(ctx context.Context, userID, id int64, acct book.Account, amount decimal.Decimal, m move) (book.Deal, book.Account, bool, error) {
	cat, err := s.catalog.Get(ctx)
	if err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	exps, err := book.LoadExposures(ctx, s.db, id)
	if err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	var tx *book.Txn
	var locks *book.Batch
	unpriceable := func(err error) error {
		if fx.ErrorCode(err) == fx.EUNAVAILABLE && !store.RolledBack(err) {
			return fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		return err
	}
	if len(exps) > 0 {
		// Free margin depends on this process's prices: the write is fenced like a fill.
		if _, ok := book.NewMarket(s.prices, cat).Metrics(acct, cat.AccountGroup(acct.Group), acct.Balance, exps); !ok {
			return book.Deal{}, book.Account{}, false, fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		if tx, locks, err = s.begin(ctx, gate.Withdrawal, "withdrawal"); err != nil {
			return book.Deal{}, book.Account{}, false, unpriceable(err)
		}
	} else if tx, locks, err = s.beginUnfenced(ctx, "withdrawal"); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	defer tx.Rollback()
	var a book.Account
	var prior book.Deal
	var found, seen bool
	locks.Query(book.RowInto(&a, &found, book.ScanAccount), book.LockAccountSQL, id)
	locks.Query(book.RowInto(&prior, &seen, book.ScanDeal), book.DealByKeySQL, m.key)
	locks.Query(book.ExposuresInto(&exps), book.ExposuresSQL, id)
	m.approval.lock(locks)
	if err := tx.Lock(ctx, locks, "withdrawal"); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if err := book.OwnedBy(a, found, userID, id); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if seen {
		return prior, a, true, amountBound(prior, amount.Neg(), m.nonce)
	}
	if err := m.approval.check(); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if userID != 0 {
		if err := stateRefusal(a, actWithdraw); err != nil {
			return book.Deal{}, book.Account{}, false, err
		}
	}
	if amount.GreaterThan(a.Balance) {
		return book.Deal{}, book.Account{}, false, fx.Errorf(fx.ECONFLICT, "Insufficient funds: the balance is %s %s.", fx.FormatMoney(a.Currency, a.Balance), a.Currency)
	}
	var marks *book.Metrics
	if len(exps) > 0 {
		g := cat.AccountGroup(a.Group)
		market := book.NewMarket(s.prices, cat)
		before, ok := market.Metrics(a, g, a.Balance, exps)
		if !ok {
			return book.Deal{}, book.Account{}, false, fx.Errorf(fx.EUNAVAILABLE, fx.MsgPositionsUnpriceable)
		}
		if before.MarginLevel != nil && before.MarginLevel.LessThan(g.MarginCallLevel) {
			return book.Deal{}, book.Account{}, false, fx.Errorf(fx.ECONFLICT, "Withdrawals are refused while the margin level (%s%%) is below the margin-call level (%s%%).",
				before.MarginLevel.StringFixed(2), g.MarginCallLevel.StringFixed(2))
		}
		if amount.GreaterThan(before.FreeMargin) {
			return book.Deal{}, book.Account{}, false, fx.Errorf(fx.ECONFLICT, "Insufficient free margin: at most %s %s can be withdrawn while positions are open.",
				fx.FormatMoney(a.Currency, decimal.Max(before.FreeMargin, decimal.Zero)), a.Currency)
		}
		after, _ := market.Metrics(a, g, a.Balance.Sub(amount), exps)
		marks = &after
	}
	b := &book.Batch{}
	if err := m.record(ctx, b, a, amount.Neg()); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	if err := events.Add(b, balanceEvent(a, events.Withdrawal, fx.DealWithdrawal, amount.Neg(), m.key, "withdrawal", s.term())); err != nil {
		return book.Deal{}, book.Account{}, false, err
	}
	d, err := book.CommitDeal(ctx, tx, b, &a, book.Deal{Type: fx.DealWithdrawal, Amount: amount.Neg(), IdempotencyKey: m.key, Comment: "withdrawal"}, marks, m.naming())
	if err != nil {
		return book.Deal{}, book.Account{}, false, unpriceable(err)
	}
	return d, a, false, nil
}

// amountBound refuses (EKEYREUSED) a deposit or withdrawal whose requestNonce already names deal
// d of another amount (signed as the deal's: a withdrawal's is negative). The account is bound by
// the deal's key, which names it.
func amountBound(d book.Deal, amount decimal.Decimal, nonce string) error {
	if d.Amount.Equal(amount) {
		return nil
	}
	what := kindWord(d.Type)
	return fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d for a %s of %s %s (deal %d); nothing was done. "+
		"Send a new %s with a new requestNonce; resending the original request unchanged replays it.",
		nonce, d.AccountID, what, fx.FormatMoney(d.Currency, d.Amount.Abs()), d.Currency, d.ID, what)
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

// Deals lists a page of userID's ledger, newest first (f.AccountID 0: every account of the
// user; f.Limit clamped to maxList).
func (acs *Accounts) Deals(ctx context.Context, userID int64, f book.ListFilter) ([]book.Deal, error) {
	f.Limit = clampLimit(f.Limit)
	return book.ListDeals(ctx, acs.s.db, userID, f)
}
