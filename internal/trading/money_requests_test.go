package trading

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/gatetest"
)

// staff is ctx acting for desk user user with token token, as the API sets it.
func staff(user, token int64) context.Context {
	return audit.WithActor(context.Background(), audit.Actor{UserID: user, TokenID: token, Via: "api", RequestID: "four-eyes-" + strconv.FormatInt(token, 10)})
}

// moneyState is what four eyes must leave alone or move: the account's deals and balance and
// its requests' states.
type moneyState struct {
	deals    string
	balance  string
	requests string
}

func moneyStateOf(t *testing.T, account int64) moneyState {
	t.Helper()
	c := counts(t, account)
	var requests string
	if err := testDB.QueryRow("SELECT COALESCE(GROUP_CONCAT(CONCAT(`id`, ':', `state`, ':', COALESCE(`dealId`, '-')) ORDER BY `id`), '') "+
		"FROM `fx_money_request` WHERE `accountId` = ?", account).Scan(&requests); err != nil {
		t.Fatal(err)
	}
	return moneyState{deals: c[1], balance: c[2], requests: requests}
}

// auditActions is the actions of the audit rows of money request id, oldest first.
func auditActions(t *testing.T, id int64) []string {
	t.Helper()
	es, err := audit.List(context.Background(), testDB, audit.Filter{EntityType: "money_request", EntityID: strconv.FormatInt(id, 10)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(es) - 1; i >= 0; i-- {
		out = append(out, es[i].Action)
	}
	return out
}

// dealsKeyed counts the deals with idempotency key key, and the events that tell of them.
func dealsKeyed(t *testing.T, key string) (deals, events int) {
	t.Helper()
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_deal` WHERE `idempotencyKey` = ?", key).Scan(&deals); err != nil {
		t.Fatal(err)
	}
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_event` WHERE JSON_UNQUOTE(JSON_EXTRACT(`payload`, '$.idempotencyKey')) = ?", key).Scan(&events); err != nil {
		t.Fatal(err)
	}
	return deals, events
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// A deposit by staff above the threshold (10,000 by default) is a PENDING request that moves no
// money; a retry under its nonce returns it; the user who asked cannot approve it, with this or
// any other token of theirs; a second finance user's approval makes exactly one deal, with its
// event, and marks the request APPROVED naming it; approving again, by anyone, changes nothing.
// At the threshold exactly the deposit is made at once. Σ deals = balance throughout.
func TestLargeDepositWaitsForASecondUser(t *testing.T) {
	t.Parallel()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a, err := svc.Accounts().Open(context.Background(), 9801, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	alice, alice2, bob, carol := staff(7001, 71), staff(7001, 72), staff(7002, 73), staff(7003, 74)
	fin := svc.Finance()

	at, err := fin.Deposit(alice, a.ID, dec("10000.00"), "at-threshold", "")
	if err != nil || at.Deal == nil || at.Request != nil || !at.Deal.Amount.Equal(dec("10000")) {
		t.Fatalf("a deposit at the threshold: %+v %v, want a deal made at once", at, err)
	}
	before := moneyStateOf(t, a.ID)
	big, err := fin.Deposit(alice, a.ID, dec("10000.01"), "big", "wire 4711")
	if err != nil || big.Request == nil || big.Deal != nil || big.Replayed {
		t.Fatalf("a deposit above the threshold: %+v %v, want a pending request", big, err)
	}
	r := *big.Request
	if r.State != fx.MoneyRequestPending || r.Kind != fx.DealDeposit || !r.Amount.Equal(dec("10000.01")) || r.Currency != "USD" || r.Comment != "wire 4711" ||
		r.RequestedBy != 7001 || r.RequestedToken == nil || *r.RequestedToken != 71 || r.DealID != nil || !r.ExpiresAt.After(r.CreatedAt) {
		t.Fatalf("the request = %+v", r)
	}
	if after := moneyStateOf(t, a.ID); after.deals != before.deals || after.balance != before.balance {
		t.Fatalf("a pending request moved money: %+v → %+v", before, after)
	}
	if got := auditActions(t, r.ID); len(got) != 1 || got[0] != "money_request.create" {
		t.Fatalf("audit rows of the request: %v", got)
	}

	// A retry returns the same request; another amount under the nonce is refused.
	again, err := fin.Deposit(alice, a.ID, dec("10000.01"), "big", "wire 4711")
	if err != nil || again.Request == nil || again.Request.ID != r.ID || !again.Replayed {
		t.Fatalf("the retry: %+v %v, want request %d replayed", again, err, r.ID)
	}
	if _, err := fin.Deposit(alice, a.ID, dec("20000"), "big", ""); fx.ErrorCode(err) != fx.EKEYREUSED {
		t.Fatalf("another amount under the nonce: %v", err)
	}
	pending := moneyStateOf(t, a.ID)

	// Four eyes: the requester is refused with any of their tokens, and nothing changes.
	for name, ctx := range map[string]context.Context{"the requester": alice, "the requester's other token": alice2} {
		if _, _, _, err := fin.Approve(ctx, r.ID); fx.ErrorCode(err) != fx.EFORBIDDEN {
			t.Fatalf("%s approved: %v, want EFORBIDDEN", name, err)
		}
	}
	if got := moneyStateOf(t, a.ID); got != pending {
		t.Fatalf("a refused approval changed %+v → %+v", pending, got)
	}

	approved, d, replayed, err := fin.Approve(bob, r.ID)
	if err != nil || replayed {
		t.Fatalf("bob's approval: %v (replayed %v)", err, replayed)
	}
	key := "money-request:" + strconv.FormatInt(r.ID, 10)
	if approved.State != fx.MoneyRequestApproved || approved.DealID == nil || *approved.DealID != d.ID || approved.DecidedBy == nil || *approved.DecidedBy != 7002 ||
		approved.DecidedAt == nil || d.Type != fx.DealDeposit || !d.Amount.Equal(dec("10000.01")) || d.IdempotencyKey != key || !d.BalanceAfter.Equal(dec("20000.01")) {
		t.Fatalf("approved %+v with deal %+v", approved, d)
	}
	if n, ev := dealsKeyed(t, key); n != 1 || ev != 1 {
		t.Fatalf("%d deals and %d events for %s, want one each", n, ev, key)
	}
	// Again, by the approver and by a third user: the first outcome, nothing new.
	for name, ctx := range map[string]context.Context{"bob": bob, "carol": carol} {
		r2, d2, replayed, err := fin.Approve(ctx, r.ID)
		if err != nil || !replayed || d2.ID != d.ID || r2.State != fx.MoneyRequestApproved || *r2.DealID != d.ID {
			t.Fatalf("%s approving again: %+v %+v replayed %v %v", name, r2, d2, replayed, err)
		}
	}
	if n, ev := dealsKeyed(t, key); n != 1 || ev != 1 {
		t.Fatalf("after the replays: %d deals and %d events for %s", n, ev, key)
	}
	if got := auditActions(t, r.ID); len(got) != 2 || got[1] != "money_request.approve" {
		t.Fatalf("audit rows of the request: %v", got)
	}
	// A creation retried after the approval still names the request, never a second one.
	late, err := fin.Deposit(alice, a.ID, dec("10000.01"), "big", "wire 4711")
	if err != nil || late.Request == nil || late.Request.ID != r.ID || late.Request.State != fx.MoneyRequestApproved {
		t.Fatalf("the creation retried after the approval: %+v %v", late, err)
	}
	if got := moneyStateOf(t, a.ID); !dec(got.balance).Equal(dec("20000.01")) || got.deals != "2" {
		t.Fatalf("the account ends %+v, want two deals and 20000.01", got)
	}
	wantLedgerBalanced(t, a.ID)
}

// Approvals of one request racing from eight goroutines, by eight other users, make one deal:
// one approval makes it, the seven others answer it replayed. The same for a withdrawal.
func TestConcurrentApprovalsMakeOneDeal(t *testing.T) {
	t.Parallel()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	fin := svc.Finance()
	for _, tc := range []struct {
		kind   fx.DealType
		amount string
		want   string // the balance after
	}{{fx.DealDeposit, "30000.00", "30000.00"}, {fx.DealWithdrawal, "25000.00", "5000.00"}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			a, err := svc.Accounts().Open(context.Background(), 9802, "USD", 100)
			if err != nil {
				t.Fatal(err)
			}
			move := fin.Deposit
			if tc.kind == fx.DealWithdrawal {
				if _, _, err := svc.Accounts().Deposit(asAdmin(context.Background()), a.ID, dec("30000"), "seed"); err != nil {
					t.Fatal(err)
				}
				move = fin.Withdraw
			}
			m, err := move(staff(7101, 81), a.ID, dec(tc.amount), "race", "")
			if err != nil || m.Request == nil {
				t.Fatalf("the request: %+v %v", m, err)
			}
			var deals [8]book.Deal
			var replays [8]bool
			var errs [8]error
			var fns []func()
			for i := range 8 {
				fns = append(fns, func() {
					_, deals[i], replays[i], errs[i] = fin.Approve(staff(int64(7110+i), int64(90+i)), m.Request.ID)
				})
			}
			concurrently(fns...)
			made := 0
			for i := range 8 {
				if errs[i] != nil {
					t.Fatalf("approval %d: %v", i, errs[i])
				}
				if deals[i].ID != deals[0].ID {
					t.Fatalf("approvals answered deals %d and %d", deals[0].ID, deals[i].ID)
				}
				if !replays[i] {
					made++
				}
			}
			if made != 1 {
				t.Fatalf("%d approvals say they made the deal, want 1", made)
			}
			key := "money-request:" + strconv.FormatInt(m.Request.ID, 10)
			if n, ev := dealsKeyed(t, key); n != 1 || ev != 1 {
				t.Fatalf("%d deals and %d events for %s, want one each", n, ev, key)
			}
			if got := moneyStateOf(t, a.ID); !dec(got.balance).Equal(dec(tc.want)) {
				t.Fatalf("balance %s, want %s", got.balance, tc.want)
			}
			wantLedgerBalanced(t, a.ID)
		})
	}
}

// A rejected request and an expired one cannot be approved, and move no money. Rejection
// records the reason and who decided (the requester may take back their own request); an empty
// reason is refused and changes nothing. A request past its expiry is marked EXPIRED, with an
// audit row, by the approval, the rejection or the list that finds it.
func TestRejectedAndExpiredRequestsCannotBeApproved(t *testing.T) {
	t.Parallel()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	fin := svc.Finance()
	a, err := svc.Accounts().Open(context.Background(), 9803, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := staff(7201, 61), staff(7202, 62)
	request := func(nonce string) MoneyRequest {
		t.Helper()
		m, err := fin.Deposit(alice, a.ID, dec("15000"), nonce, "")
		if err != nil || m.Request == nil {
			t.Fatalf("request %s: %+v %v", nonce, m, err)
		}
		return *m.Request
	}
	expire := func(r MoneyRequest) {
		t.Helper()
		if _, err := testDB.Exec("UPDATE `fx_money_request` SET `expiresAt` = NOW(3) - INTERVAL 1 SECOND WHERE `id` = ?", r.ID); err != nil {
			t.Fatal(err)
		}
	}
	stateOf := func(r MoneyRequest) string {
		t.Helper()
		var s string
		if err := testDB.QueryRow("SELECT `state` FROM `fx_money_request` WHERE `id` = ?", r.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	start := moneyStateOf(t, a.ID)

	rejected := request("reject-me")
	before := moneyStateOf(t, a.ID)
	if _, err := fin.Reject(bob, rejected.ID, "  "); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("a rejection without a reason: %v", err)
	}
	if got := moneyStateOf(t, a.ID); got != before {
		t.Fatalf("a refused rejection changed %+v → %+v", before, got)
	}
	r, err := fin.Reject(alice, rejected.ID, "typo in the amount")
	if err != nil || r.State != fx.MoneyRequestRejected || r.Reason == nil || *r.Reason != "typo in the amount" || r.DecidedBy == nil || *r.DecidedBy != 7201 {
		t.Fatalf("the rejection: %+v %v", r, err)
	}
	if _, _, _, err := fin.Approve(bob, rejected.ID); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("approving a rejected request: %v", err)
	}
	if _, err := fin.Reject(bob, rejected.ID, "again"); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("rejecting a rejected request: %v", err)
	}
	if got := auditActions(t, rejected.ID); len(got) != 2 || got[1] != "money_request.reject" {
		t.Fatalf("audit rows of the rejected request: %v", got)
	}

	for _, tc := range []struct {
		name  string
		touch func(r MoneyRequest) error
	}{
		{"approval", func(r MoneyRequest) error { _, _, _, err := fin.Approve(bob, r.ID); return err }},
		{"rejection", func(r MoneyRequest) error { _, err := fin.Reject(bob, r.ID, "too late"); return err }},
		{"list", func(r MoneyRequest) error {
			rs, err := fin.Requests(bob, MoneyRequestFilter{AccountID: a.ID, State: fx.MoneyRequestPending})
			for _, l := range rs {
				if l.ID == r.ID {
					t.Errorf("the list shows request %d PENDING past its expiry", r.ID)
				}
			}
			return err
		}},
	} {
		r := request("expire-by-" + tc.name)
		expire(r)
		err := tc.touch(r)
		if tc.name != "list" && fx.ErrorCode(err) != fx.ECONFLICT || tc.name == "list" && err != nil {
			t.Fatalf("%s of an expired request: %v", tc.name, err)
		}
		if s := stateOf(r); s != fx.MoneyRequestExpired {
			t.Fatalf("after the %s the expired request is %s", tc.name, s)
		}
		if got := auditActions(t, r.ID); len(got) != 2 || got[1] != "money_request.expire" {
			t.Fatalf("audit rows of the request the %s expired: %v", tc.name, got)
		}
		if _, _, _, err := fin.Approve(bob, r.ID); fx.ErrorCode(err) != fx.ECONFLICT {
			t.Fatalf("approving the request the %s expired: %v", tc.name, err)
		}
		if got := auditActions(t, r.ID); len(got) != 2 {
			t.Fatalf("a second look at an EXPIRED request wrote audit rows: %v", got)
		}
	}
	if got := moneyStateOf(t, a.ID); got.deals != start.deals || got.balance != start.balance {
		t.Fatalf("rejected and expired requests moved money: %+v → %+v", start, got)
	}
	wantLedgerBalanced(t, a.ID)
}

// A staff withdrawal from another user's account is made at once up to the threshold, with an
// audit row and a key of its own (a trader's nonce cannot replay it); above it, it waits for a
// second user, whose approval is checked as the trader's own withdrawal is — against the free
// margin at this process's prices — and, refused, leaves the request PENDING to be approved once
// the margin allows.
func TestStaffWithdrawalChecksMarginAtApproval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	fin := svc.Finance()
	const trader = 9804
	a, err := svc.Accounts().Open(ctx, trader, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Accounts().Deposit(asAdmin(ctx), a.ID, dec("12000"), "seed"); err != nil {
		t.Fatal(err)
	}
	alice, bob := staff(7301, 51), staff(7302, 52)

	// The trader withdraws 5 under nonce "n"; staff withdrawing 5 under "n" is a withdrawal of its own.
	if _, _, err := svc.Accounts().Withdraw(ctx, trader, a.ID, dec("5"), "n"); err != nil {
		t.Fatal(err)
	}
	small, err := fin.Withdraw(alice, a.ID, dec("5"), "n", "")
	if err != nil || small.Deal == nil || small.Replayed || small.Deal.IdempotencyKey != "staff-withdraw:"+strconv.FormatInt(a.ID, 10)+":n:n" {
		t.Fatalf("a small staff withdrawal: %+v %v", small, err)
	}
	es, err := audit.List(ctx, testDB, audit.Filter{EntityType: "account", EntityID: strconv.FormatInt(a.ID, 10), Limit: 1})
	if err != nil || len(es) != 1 || es[0].Action != "account.withdraw" || es[0].ActorUserID == nil || *es[0].ActorUserID != 7301 {
		t.Fatalf("the small withdrawal's audit row: %+v %v", es, err)
	}

	// 1 lot EURUSD at 1:100 takes about 1,100 of margin: 11,000 of the 11,990 is beyond free margin.
	open, err := svc.PlaceOrder(ctx, trader, marketBuy(a.ID, "1", ""))
	if err != nil {
		t.Fatal(err)
	}
	big, err := fin.Withdraw(alice, a.ID, dec("11000"), "big", "payout")
	if err != nil || big.Request == nil {
		t.Fatalf("a large staff withdrawal: %+v %v", big, err)
	}
	pending := moneyStateOf(t, a.ID)
	if _, _, _, err := fin.Approve(bob, big.Request.ID); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("approving a withdrawal beyond free margin: %v", err)
	}
	if got := moneyStateOf(t, a.ID); got != pending {
		t.Fatalf("a refused approval changed %+v → %+v", pending, got)
	}
	if _, err := svc.ClosePosition(ctx, trader, open.Position.ID, nil, fx.CloseClient); err != nil {
		t.Fatal(err)
	}
	r, d, _, err := fin.Approve(bob, big.Request.ID)
	if err != nil || r.State != fx.MoneyRequestApproved || d.Type != fx.DealWithdrawal || !d.Amount.Equal(dec("-11000")) {
		t.Fatalf("approving once the position closed: %+v %+v %v", r, d, err)
	}
	wantLedgerBalanced(t, a.ID)
}

// A move with no actor is refused before anything is read or written, and a request whose
// actor names no platform user (the command line) cannot be made: nobody could tell its
// approver apart.
func TestMoneyRequestsNeedAUser(t *testing.T) {
	t.Parallel()
	svc := newService(t, Config{DB: testDB, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a, err := svc.Accounts().Open(context.Background(), 9805, "USD", 100)
	if err != nil {
		t.Fatal(err)
	}
	before := moneyStateOf(t, a.ID)
	if _, err := svc.Finance().Deposit(context.Background(), a.ID, dec("20000"), "", ""); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	if _, err := svc.Finance().Deposit(asAdmin(context.Background()), a.ID, dec("20000"), "", ""); fx.ErrorCode(err) != fx.EFORBIDDEN {
		t.Fatalf("an actor without a user: %v", err)
	}
	if got := moneyStateOf(t, a.ID); got != before {
		t.Fatalf("refused moves changed %+v → %+v", before, got)
	}
}
