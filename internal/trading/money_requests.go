package trading

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Finance is the finance desk's side: the deposits and withdrawals desk staff make on any
// account. Up to the four-eyes threshold (catalog.SettingFourEyesAbove) each is made at once;
// above it, each is written as a PENDING money request, which a second finance user — another
// platform user than the one who asked — approves, making its deal, or which anyone with the
// money permission rejects (docs/identity.md, «Four eyes on client money»).
//
// Every write names its actor from the context (audit.ActorFrom) and records one audit row in
// its own transaction: account.deposit or account.withdraw for a move made at once,
// money_request.create, .approve, .reject and .expire for a request.
type Finance struct{ s *Service }

// Finance returns the service's finance side.
func (s *Service) Finance() *Finance { return &Finance{s} }

// MoneyRequestTTL is how long a money request waits for its decision, on the database's clock.
// Past it the request can no longer be approved: it is marked EXPIRED, with an audit row, the
// next time it is listed, approved or rejected, and its staff asks again if the money must move.
const MoneyRequestTTL = 24 * time.Hour

// MoneyRequest is one row of fx_money_request: a staff deposit or withdrawal above the
// four-eyes threshold, and its decision.
type MoneyRequest struct {
	ID        int64
	AccountID int64
	// Kind is the deal the request makes once approved: fx.DealDeposit or fx.DealWithdrawal.
	Kind         fx.DealType
	Amount       decimal.Decimal // positive, in Currency, the account's
	Currency     string
	Comment      string
	RequestNonce *string
	State        string // fx.MoneyRequestPending, …Approved, …Rejected, …Expired
	// RequestedBy is the platform user who asked, RequestedToken the desk token they asked
	// with; DecidedBy the user who approved or rejected it (nil while PENDING, and for EXPIRED).
	RequestedBy    int64
	RequestedToken *int64
	DecidedBy      *int64
	DecidedAt      *time.Time
	Reason         *string // a rejection's
	ExpiresAt      time.Time
	DealID         *int64 // the deal an approval made; set exactly when APPROVED
	CreatedAt      time.Time

	due bool // PENDING or not, its expiry has passed by the database's clock as it was read
}

// dealKey is the idempotency key of the deal an approval makes: one per request, so that no
// replay of an approval, however it races, can make a second.
func (r MoneyRequest) dealKey() string { return "money-request:" + itoa(r.ID) }

// what is the request's kind in words, for messages.
func (r MoneyRequest) what() string { return kindWord(r.Kind) }

func kindWord(k fx.DealType) string {
	if k == fx.DealWithdrawal {
		return "withdrawal"
	}
	return "deposit"
}

// StaffMove is what a staff deposit or withdrawal did: either Deal, made at once (at or below
// the threshold), or Request, left PENDING (above it). Replayed: its requestNonce already named
// that deal or request, which is returned, and nothing was written.
type StaffMove struct {
	Deal     *book.Deal
	Request  *MoneyRequest
	Replayed bool
}

// moneyRequestCols are fx_money_request's columns as scanMoneyRequest reads them, and whether
// the row's expiry has passed by the database's clock.
const moneyRequestCols = "`id`, `accountId`, `kind`, `amount`, `currency`, `comment`, `requestNonce`, `state`, `requestedBy`, `requestedToken`, " +
	"`decidedBy`, `decidedAt`, `reason`, `expiresAt`, `dealId`, `createdAt`, `expiresAt` <= NOW(3)"

// moneyRequestSQL reads request ?; lockMoneyRequestSQL takes it for update.
const (
	moneyRequestSQL     = "SELECT " + moneyRequestCols + " FROM `fx_money_request` WHERE `id` = ?"
	lockMoneyRequestSQL = "SELECT " + moneyRequestCols + " FROM `fx_money_request` WHERE `id` = ? FOR UPDATE"
)

func scanMoneyRequest(sc store.Scanner) (MoneyRequest, error) {
	var r MoneyRequest
	err := sc.Scan(&r.ID, &r.AccountID, &r.Kind, &r.Amount, &r.Currency, &r.Comment, &r.RequestNonce, &r.State, &r.RequestedBy, &r.RequestedToken,
		&r.DecidedBy, &r.DecidedAt, &r.Reason, &r.ExpiresAt, &r.DealID, &r.CreatedAt, &r.due)
	return r, err
}

// loadMoneyRequest reads request id (ENOTFOUND when there is none) through q, a transaction
// that has locked it or the pool.
func loadMoneyRequest(ctx context.Context, q book.Querier, query string, id int64) (MoneyRequest, error) {
	r, err := scanMoneyRequest(q.QueryRowContext(ctx, query, id))
	if errors.Is(err, sql.ErrNoRows) {
		return MoneyRequest{}, fx.Errorf(fx.ENOTFOUND, "Money request %d not found.", id)
	}
	if err != nil {
		return MoneyRequest{}, fmt.Errorf("read money request %d: %w", id, err)
	}
	return r, nil
}

// Deposit credits amount to account id for ctx's actor, desk staff: at once up to the four-eyes
// threshold (as Accounts.Deposit), above it as a PENDING money request. comment is the staff's
// note on a request (at most 255 characters). A repeated requestNonce returns what it first
// made, deal or request, whatever the threshold is now; under another amount it is refused
// (EKEYREUSED). Errors: EINVALID, ENOTFOUND, EKEYREUSED, audit.ErrNoActor, EFORBIDDEN for a
// request whose actor names no platform user.
func (f *Finance) Deposit(ctx context.Context, id int64, amount decimal.Decimal, nonce, comment string) (StaffMove, error) {
	return f.move(ctx, fx.DealDeposit, id, amount, nonce, comment)
}

// Withdraw debits amount from account id, whoever owns it, for ctx's actor, desk staff: at once
// up to the four-eyes threshold, with the trader's own withdrawal's margin checks at this
// process's prices (EUNAVAILABLE where it cannot price an open position) and an audit row
// (account.withdraw); above it as a PENDING money request, whose checks are made when it is
// approved. requestNonce and comment as Deposit's.
func (f *Finance) Withdraw(ctx context.Context, id int64, amount decimal.Decimal, nonce, comment string) (StaffMove, error) {
	return f.move(ctx, fx.DealWithdrawal, id, amount, nonce, comment)
}

// staffWithdrawalKey is the idempotency key of a staff withdrawal made at once, apart from the
// trader's own ("withdraw:…") so that a staff nonce can never replay the trader's withdrawal.
func staffWithdrawalKey(id int64, nonce string) string {
	return "staff-withdraw:" + itoa(id) + ":" + nonceOrRandom(nonce)
}

// move is Deposit's and Withdraw's: kind names which.
func (f *Finance) move(ctx context.Context, kind fx.DealType, id int64, amount decimal.Decimal, nonce, comment string) (StaffMove, error) {
	s := f.s
	actor, ok := audit.ActorFrom(ctx)
	if !ok {
		return StaffMove{}, audit.ErrNoActor
	}
	if len(comment) > 255 {
		return StaffMove{}, fx.Errorf(fx.EINVALID, "comment must be at most 255 characters.")
	}
	a, err := book.LoadAccount(ctx, s.db, 0, id)
	if err != nil {
		return StaffMove{}, err
	}
	if err := checkAmount(a.Currency, amount); err != nil {
		return StaffMove{}, err
	}
	if nonce != "" {
		// A nonce names what it first made, whatever the threshold has been since: a request
		// here, or a deal made at once (below).
		r, found, err := moneyRequestByNonce(ctx, s.db, id, kind, nonce)
		if err != nil {
			return StaffMove{}, err
		}
		if found {
			if err := requestBound(r, amount, nonce); err != nil {
				return StaffMove{}, err
			}
			return StaffMove{Request: &r, Replayed: true}, nil
		}
	}
	key := depositKey(id, nonce)
	if kind == fx.DealWithdrawal {
		key = staffWithdrawalKey(id, nonce)
	}
	if above, on := s.settings.FourEyesAbove(); !on || !amount.GreaterThan(above) {
		var d book.Deal
		var replayed bool
		if kind == fx.DealWithdrawal {
			d, replayed, err = s.withdrawal(ctx, 0, id, amount, move{key: key, nonce: nonce, action: "account.withdraw"})
		} else {
			d, replayed, err = s.Accounts().Deposit(ctx, id, amount, nonce)
		}
		if err != nil {
			return StaffMove{}, err
		}
		return StaffMove{Deal: &d, Replayed: replayed}, nil
	}
	if nonce != "" {
		d, made, err := book.LoadDealByKey(ctx, s.db, key)
		if err != nil {
			return StaffMove{}, err
		}
		if made {
			sign := amount
			if kind == fx.DealWithdrawal {
				sign = amount.Neg()
			}
			if err := amountBound(d, sign, nonce); err != nil {
				return StaffMove{}, err
			}
			return StaffMove{Deal: &d, Replayed: true}, nil
		}
	}
	if actor.UserID == 0 {
		return StaffMove{}, fx.Errorf(fx.EFORBIDDEN, "A %s above the four-eyes threshold waits for another user's approval, so it must name the platform user who asks for it; this caller names none.", kindWord(kind))
	}
	var r MoneyRequest
	var replayed bool
	err = s.retry(ctx, func() (err error) {
		r, replayed, err = s.insertMoneyRequest(ctx, a, kind, amount, nonce, comment, actor)
		return err
	})
	if err != nil {
		return StaffMove{}, err
	}
	return StaffMove{Request: &r, Replayed: replayed}, nil
}

// moneyRequestByNonce finds account's request of kind made under nonce.
func moneyRequestByNonce(ctx context.Context, q book.Querier, account int64, kind fx.DealType, nonce string) (MoneyRequest, bool, error) {
	r, err := scanMoneyRequest(q.QueryRowContext(ctx, "SELECT "+moneyRequestCols+" FROM `fx_money_request` WHERE `accountId` = ? AND `kind` = ? AND `requestNonce` = ?",
		account, kind, nonce))
	if errors.Is(err, sql.ErrNoRows) {
		return MoneyRequest{}, false, nil
	}
	if err != nil {
		return MoneyRequest{}, false, fmt.Errorf("look up money request %q of account %d: %w", nonce, account, err)
	}
	return r, true, nil
}

// requestBound refuses (EKEYREUSED) a staff deposit or withdrawal whose requestNonce already
// names request r of another amount; the account and kind are bound by the lookup.
func requestBound(r MoneyRequest, amount decimal.Decimal, nonce string) error {
	if r.Amount.Equal(amount) {
		return nil
	}
	return fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d for a %s of %s %s (money request %d); nothing was done. "+
		"Send a new %s with a new requestNonce; resending the original request unchanged replays it.",
		nonce, r.AccountID, r.what(), fx.FormatMoney(r.Currency, r.Amount), r.Currency, r.ID, r.what())
}

// insertMoneyRequest writes a PENDING request of kind for amount on account a, asked by actor,
// with its audit row (money_request.create). A nonce another creation took first (the unique
// key) returns that request, replayed.
func (s *Service) insertMoneyRequest(ctx context.Context, a book.Account, kind fx.DealType, amount decimal.Decimal, nonce, comment string, actor audit.Actor) (MoneyRequest, bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return MoneyRequest{}, false, fmt.Errorf("create money request: begin: %w", err)
	}
	defer tx.Rollback()
	var nonceArg, tokenArg any
	if nonce != "" {
		nonceArg = nonce
	}
	if actor.TokenID != 0 {
		tokenArg = actor.TokenID
	}
	res, err := tx.ExecContext(ctx, "INSERT INTO `fx_money_request` (`accountId`, `kind`, `amount`, `currency`, `comment`, `requestNonce`, `requestedBy`, `requestedToken`, `expiresAt`) "+
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, NOW(3) + INTERVAL ? SECOND)",
		a.ID, kind, amount, a.Currency, comment, nonceArg, actor.UserID, tokenArg, int64(MoneyRequestTTL/time.Second))
	if store.IsDuplicateKey(err) && nonce != "" {
		// The other creation has committed (the server waited for it): read it as it stands.
		tx.Rollback()
		r, found, err := moneyRequestByNonce(ctx, s.db, a.ID, kind, nonce)
		if err == nil && !found {
			err = fmt.Errorf("create money request: nonce %q of account %d is taken, yet no request holds it", nonce, a.ID)
		}
		if err == nil {
			err = requestBound(r, amount, nonce)
		}
		return r, err == nil, err
	}
	if err != nil {
		return MoneyRequest{}, false, fmt.Errorf("create money request: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return MoneyRequest{}, false, fmt.Errorf("create money request: %w", err)
	}
	r, err := loadMoneyRequest(ctx, tx, moneyRequestSQL, id)
	if err != nil {
		return MoneyRequest{}, false, err
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "money_request.create", EntityType: "money_request", EntityID: itoa(id), After: r.record()}); err != nil {
		return MoneyRequest{}, false, err
	}
	if err := store.Commit(tx); err != nil {
		return MoneyRequest{}, false, fmt.Errorf("create money request: commit: %w", err)
	}
	return r, false, nil
}

// Approve carries out PENDING money request id for ctx's actor, who must be another platform
// user than the one who asked (EFORBIDDEN otherwise, whatever the request's state). The deal is
// made with idempotency key money-request:<id> through the path of the staff move it stands
// for, and the request marked APPROVED naming the deal, in the deal's own transaction, with one
// audit row (money_request.approve) and the deal's balance event. A request approved already
// returns its deal with replayed true and changes nothing, however many approvals race.
//
// A REJECTED or EXPIRED request, or a PENDING one past its expiry (marked EXPIRED now, with its
// audit row), is refused with ECONFLICT. The deal's own rules refuse as the staff move's would
// (a withdrawal's balance and margin at this process's prices — EUNAVAILABLE where it cannot
// price an open position) and leave the request PENDING. Errors also: ENOTFOUND,
// audit.ErrNoActor.
func (f *Finance) Approve(ctx context.Context, id int64) (MoneyRequest, book.Deal, bool, error) {
	s := f.s
	actor, ok := audit.ActorFrom(ctx)
	if !ok {
		return MoneyRequest{}, book.Deal{}, false, audit.ErrNoActor
	}
	// A request moves only forward from PENDING, so a second look decides what a race with
	// another decision, or with the clock, changed under the first.
	for range 3 {
		r, err := loadMoneyRequest(ctx, s.db, moneyRequestSQL, id)
		if err != nil {
			return MoneyRequest{}, book.Deal{}, false, err
		}
		if actor.UserID == 0 || actor.UserID == r.RequestedBy {
			return MoneyRequest{}, book.Deal{}, false, fx.Errorf(fx.EFORBIDDEN,
				"Money request %d was asked for by user %d: another finance user must approve it (four eyes); nothing was done.", id, r.RequestedBy)
		}
		switch {
		case r.State == fx.MoneyRequestApproved:
			d, made, err := book.LoadDealByKey(ctx, s.db, r.dealKey())
			if err == nil && !made {
				err = fmt.Errorf("money request %d is APPROVED without its deal %s", id, r.dealKey())
			}
			return r, d, err == nil, err
		case r.State != fx.MoneyRequestPending:
			return MoneyRequest{}, book.Deal{}, false, fx.Errorf(fx.ECONFLICT, "Money request %d is %s: only a PENDING request can be approved; nothing was done.", id, r.State)
		case r.due:
			if err := s.expireDue(ctx, 0, id); err != nil {
				return MoneyRequest{}, book.Deal{}, false, err
			}
			return MoneyRequest{}, book.Deal{}, false, expiredRefusal(r, "approved")
		}
		p := &approval{id: id, approver: actor.UserID}
		m := move{key: r.dealKey(), approval: p}
		var d book.Deal
		var replayed bool
		if r.Kind == fx.DealWithdrawal {
			d, replayed, err = s.withdrawal(ctx, 0, r.AccountID, r.Amount, m)
		} else {
			d, replayed, err = s.balanceChange(ctx, func() (book.Deal, book.Account, bool, error) { return s.deposit(ctx, r.AccountID, r.Amount, m) })
		}
		if errors.Is(err, errRequestMoved) {
			continue
		}
		if err != nil {
			return MoneyRequest{}, book.Deal{}, false, err
		}
		if r, err = loadMoneyRequest(ctx, s.db, moneyRequestSQL, id); err != nil {
			return MoneyRequest{}, book.Deal{}, false, err
		}
		return r, d, replayed, nil
	}
	return MoneyRequest{}, book.Deal{}, false, fx.Errorf(fx.ECONFLICT, "Money request %d changed while it was being approved; nothing was done. Read it again.", id)
}

// errRequestMoved: under the deal's locks the request was no longer PENDING, or had passed its
// expiry; Approve looks again.
var errRequestMoved = errors.New("the money request moved on before its approval")

// expiredRefusal is the refusal of an act on request r, which expired undecided.
func expiredRefusal(r MoneyRequest, act string) error {
	return fx.Errorf(fx.ECONFLICT, "Money request %d expired at %s without a decision and can no longer be %s; nothing was done. Ask for the %s again.",
		r.ID, r.ExpiresAt.UTC().Format(time.RFC3339), act, r.what())
}

// approval is a money request a deposit's or withdrawal's transaction carries out (move): its
// row locked after the account's (lock), found still PENDING and unexpired under that lock
// (check), and marked APPROVED with the deal's id right after the deal's INSERT (approved). The
// methods of a nil approval do nothing.
type approval struct {
	id       int64
	approver int64 // the approving platform user
	row      MoneyRequest
	found    bool
}

// lock adds the request's row lock to the transaction's first round trip, after the account's:
// the order every writer of both takes them in.
func (p *approval) lock(locks *book.Batch) {
	if p != nil {
		locks.Query(book.RowInto(&p.row, &p.found, scanMoneyRequest), lockMoneyRequestSQL, p.id)
	}
}

// check is errRequestMoved unless the locked request is PENDING and unexpired.
func (p *approval) check() error {
	if p != nil && (!p.found || p.row.State != fx.MoneyRequestPending || p.row.due) {
		return errRequestMoved
	}
	return nil
}

// change is the approval's audit row: the request before and after, with the account's balance
// after the deal of signed and the deal's key.
func (p *approval) change(a book.Account, signed decimal.Decimal, key string) audit.Change {
	after := p.row.record()
	after.State, after.DecidedBy = fx.MoneyRequestApproved, &p.approver
	after.Balance, after.IdempotencyKey = fx.FormatMoney(a.Currency, a.Balance.Add(signed)), key
	return audit.Change{Action: "money_request.approve", EntityType: "money_request", EntityID: itoa(p.id), Before: p.row.record(), After: after}
}

// approved marks the request APPROVED by its approver, naming the deal the posting has just
// inserted (book.CommitDeal runs it where LAST_INSERT_ID() is the deal's id).
func (p *approval) approved(b *book.Batch) {
	b.Exec("UPDATE `fx_money_request` SET `state` = 'APPROVED', `decidedBy` = ?, `decidedAt` = NOW(3), `dealId` = LAST_INSERT_ID() "+
		"WHERE `id` = ? AND `state` = 'PENDING'", p.approver, p.id)
}

// Reject refuses PENDING money request id for ctx's actor, with reason (required, at most 255
// characters): it is marked REJECTED with the reason and who decided, with one audit row
// (money_request.reject), and moves no money. The user who asked may reject their own request.
// A request no longer PENDING, or past its expiry (marked EXPIRED now, with its audit row), is
// ECONFLICT. Errors also: EINVALID, ENOTFOUND, audit.ErrNoActor.
func (f *Finance) Reject(ctx context.Context, id int64, reason string) (MoneyRequest, error) {
	s := f.s
	actor, ok := audit.ActorFrom(ctx)
	if !ok {
		return MoneyRequest{}, audit.ErrNoActor
	}
	reason = strings.TrimSpace(reason)
	if reason == "" || len(reason) > 255 {
		return MoneyRequest{}, fx.Errorf(fx.EINVALID, "reason must say why, in 1 to 255 characters.")
	}
	var r MoneyRequest
	var expired bool
	err := s.retry(ctx, func() (err error) {
		r, expired, err = s.reject(ctx, id, reason, actor)
		return err
	})
	if err == nil && expired {
		err = expiredRefusal(r, "rejected")
	}
	if err != nil {
		return MoneyRequest{}, err
	}
	return r, nil
}

// reject is Reject's transaction: r is the request after it, expired whether it found the
// request past its expiry and marked it so instead.
func (s *Service) reject(ctx context.Context, id int64, reason string, actor audit.Actor) (r MoneyRequest, expired bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return MoneyRequest{}, false, fmt.Errorf("reject money request: begin: %w", err)
	}
	defer tx.Rollback()
	before, err := loadMoneyRequest(ctx, tx, lockMoneyRequestSQL, id)
	if err != nil {
		return MoneyRequest{}, false, err
	}
	switch {
	case before.State != fx.MoneyRequestPending:
		return MoneyRequest{}, false, fx.Errorf(fx.ECONFLICT, "Money request %d is %s: only a PENDING request can be rejected; nothing was done.", id, before.State)
	case before.due:
		if err := markExpired(ctx, tx, before); err != nil {
			return MoneyRequest{}, false, err
		}
		expired = true
	default:
		var decidedBy any
		if actor.UserID != 0 {
			decidedBy = actor.UserID
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_money_request` SET `state` = 'REJECTED', `decidedBy` = ?, `decidedAt` = NOW(3), `reason` = ? WHERE `id` = ?",
			decidedBy, reason, id); err != nil {
			return MoneyRequest{}, false, fmt.Errorf("reject money request %d: %w", id, err)
		}
	}
	if r, err = loadMoneyRequest(ctx, tx, moneyRequestSQL, id); err != nil {
		return MoneyRequest{}, false, err
	}
	if !expired {
		if err := audit.Record(ctx, tx, audit.Change{Action: "money_request.reject", EntityType: "money_request", EntityID: itoa(id),
			Before: before.record(), After: r.record()}); err != nil {
			return MoneyRequest{}, false, err
		}
	}
	if err := store.Commit(tx); err != nil {
		return MoneyRequest{}, false, fmt.Errorf("reject money request %d: commit: %w", id, err)
	}
	return r, expired, nil
}

// MoneyRequestFilter narrows Requests; zero fields do not filter. Requests come newest first,
// Before (an id) pages back.
type MoneyRequestFilter struct {
	State     string // fx.MoneyRequestPending, …
	AccountID int64
	Before    int64 // only ids below it
	Limit     int   // at most 500 (and 500 when not positive)
}

// Requests lists money requests, newest first. The PENDING ones past their expiry, of the
// filter's account or of every account, are marked EXPIRED first, with an audit row each by ctx's
// actor, so the list never shows a request as PENDING that can no longer be approved.
func (f *Finance) Requests(ctx context.Context, flt MoneyRequestFilter) ([]MoneyRequest, error) {
	s := f.s
	if err := s.expireDue(ctx, flt.AccountID, 0); err != nil {
		return nil, err
	}
	return store.QueryAll(ctx, s.db, "list money requests", scanMoneyRequest,
		"SELECT "+moneyRequestCols+" FROM `fx_money_request` WHERE (? = '' OR `state` = ?) AND (? = 0 OR `accountId` = ?) AND (? = 0 OR `id` < ?) "+
			"ORDER BY `id` DESC LIMIT ?", flt.State, flt.State, flt.AccountID, flt.AccountID, flt.Before, flt.Before, clampLimit(flt.Limit))
}

// expireDue marks EXPIRED every PENDING request past its expiry — of account (0: any) and id (0:
// any) — with one audit row each (money_request.expire) by ctx's actor, in one transaction. The
// due ones are found without a lock first, so that a look at requests of which none is due locks
// nothing.
func (s *Service) expireDue(ctx context.Context, account, id int64) error {
	due, err := store.QueryAll(ctx, s.db, "money requests past their expiry", store.ScanInt64,
		"SELECT `id` FROM `fx_money_request` WHERE `state` = 'PENDING' AND `expiresAt` <= NOW(3) AND (? = 0 OR `accountId` = ?) AND (? = 0 OR `id` = ?) ORDER BY `id`",
		account, account, id, id)
	if err != nil || len(due) == 0 {
		return err
	}
	if _, ok := audit.ActorFrom(ctx); !ok {
		return audit.ErrNoActor
	}
	return s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("expire money requests: begin: %w", err)
		}
		defer tx.Rollback()
		for _, id := range due {
			r, err := loadMoneyRequest(ctx, tx, lockMoneyRequestSQL, id)
			if err != nil {
				return err
			}
			if r.State != fx.MoneyRequestPending || !r.due {
				continue // decided meanwhile
			}
			if err := markExpired(ctx, tx, r); err != nil {
				return err
			}
		}
		if err := store.Commit(tx); err != nil {
			return fmt.Errorf("expire money requests: commit: %w", err)
		}
		return nil
	})
}

// markExpired marks request r, locked in tx PENDING and past its expiry, EXPIRED, with its audit
// row (money_request.expire) by ctx's actor, who noticed it.
func markExpired(ctx context.Context, tx *sql.Tx, r MoneyRequest) error {
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_money_request` SET `state` = 'EXPIRED' WHERE `id` = ? AND `state` = 'PENDING'", r.ID); err != nil {
		return fmt.Errorf("expire money request %d: %w", r.ID, err)
	}
	after := r.record()
	after.State = fx.MoneyRequestExpired
	return audit.Record(ctx, tx, audit.Change{Action: "money_request.expire", EntityType: "money_request", EntityID: itoa(r.ID), Before: r.record(), After: after})
}

// moneyRequestRecord is what the audit log keeps of a money request, in the API's field names;
// an approval adds the account's balance after its deal and the deal's idempotency key.
type moneyRequestRecord struct {
	AccountID      int64     `json:"accountId"`
	Kind           string    `json:"kind"`
	Amount         string    `json:"amount"`
	Currency       string    `json:"currency"`
	Comment        string    `json:"comment,omitempty"`
	State          string    `json:"state"`
	RequestedBy    int64     `json:"requestedBy"`
	DecidedBy      *int64    `json:"decidedBy,omitempty"`
	Reason         *string   `json:"reason,omitempty"`
	ExpiresAt      time.Time `json:"expiresAt"`
	Balance        string    `json:"balance,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey,omitempty"`
}

func (r MoneyRequest) record() moneyRequestRecord {
	return moneyRequestRecord{AccountID: r.AccountID, Kind: string(r.Kind), Amount: fx.FormatMoney(r.Currency, r.Amount), Currency: r.Currency,
		Comment: r.Comment, State: r.State, RequestedBy: r.RequestedBy, DecidedBy: r.DecidedBy, Reason: r.Reason, ExpiresAt: r.ExpiresAt.UTC()}
}
