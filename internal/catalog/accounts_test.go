package catalog

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
)

func accountRow(t *testing.T, id int64) string {
	t.Helper()
	var s string
	if err := testDB.QueryRow("SELECT CONCAT_WS(' ', `accountGroup`, `state`, COALESCE(`stateReason`, '-')) FROM `fx_account` WHERE `id` = ?", id).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func openPosition(t *testing.T, account int64) {
	t.Helper()
	if _, err := testDB.Exec("INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`) VALUES (?, 0, 'EURUSD', 'BUY', 1, 1, 1.1)", account); err != nil {
		t.Fatal(err)
	}
}

// A move between INTERNAL groups keeps the account's open positions and hands the risk engine
// the new group's terms; a move that would change the execution mode under open positions, or
// into an EXTERNAL group on a desk with no venue, is refused with the reason and changes nothing.
func TestMoveAccount(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	venueless := newAdmin(t)
	r := newTermsRig(t)
	withVenue, err := NewAdmin(AdminConfig{DB: testDB, Cache: NewCache(testDB, time.Minute), Venue: true})
	if err != nil {
		t.Fatal(err)
	}
	strict, abook := uniqueGroup("strict"), uniqueGroup("abook")
	if _, err := venueless.CreateAccountGroup(ctx, strict, AccountGroupPatch{StopOutLevel: ptr(fxPercent(90)), MarginCallLevel: ptr(fxPercent(120))}); err != nil {
		t.Fatal(err)
	}
	ext := fx.External
	if _, err := withVenue.CreateAccountGroup(ctx, abook, AccountGroupPatch{Execution: &ext}); err != nil {
		t.Fatal(err)
	}
	id := openAccount(t, DefaultAccountGroup)
	openPosition(t, id)
	key := strconv.FormatInt(id, 10)

	if err := venueless.MoveAccount(ctx, id, strict); err != nil {
		t.Fatalf("INTERNAL → INTERNAL with an open position: %v", err)
	}
	if got := accountRow(t, id); got != strict+" ACTIVE -" {
		t.Fatalf("account %s", got)
	}
	if a, ok := accountTerms(r.pass(), id); !ok || a.StopOutLevel != 90 || a.Group != strict {
		t.Fatalf("the risk engine was told %+v (%v); want the new group and its terms", a, ok)
	}
	if n := auditCount(t, "account", key); n != 1 {
		t.Fatalf("%d audit rows, want 1", n)
	}

	for _, tc := range []struct {
		admin      *Admin
		group      string
		code, want string
	}{
		{venueless, abook, fx.EUNAVAILABLE, "is EXTERNAL and no execution venue is configured on this desk (FXDESK_VENUE)"},
		{withVenue, abook, fx.ECONFLICT, "1 open positions and 0 pending orders"},
		{venueless, "nobody", fx.ENOTFOUND, `Account group "nobody" not found`},
	} {
		err := tc.admin.MoveAccount(ctx, id, tc.group)
		if fx.ErrorCode(err) != tc.code || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("move to %s: %v; want %s naming %q", tc.group, err, tc.code, tc.want)
		}
	}
	if err := venueless.MoveAccount(ctx, 1<<40, strict); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Errorf("unknown account: %v", err)
	}
	told, _ := accountTerms(r.pass(), id)
	if got := accountRow(t, id); got != strict+" ACTIVE -" || auditCount(t, "account", key) != 1 || told.ID != 0 {
		t.Fatalf("refused moves changed something: %s, %d audit rows, told %+v", got, auditCount(t, "account", key), told)
	}

	// With nothing open the routing may change: its next order goes to the venue.
	empty := openAccount(t, DefaultAccountGroup)
	if err := withVenue.MoveAccount(ctx, empty, abook); err != nil {
		t.Fatal(err)
	}
	if got := accountRow(t, empty); got != abook+" ACTIVE -" {
		t.Fatalf("account %s", got)
	}
}

// A state other than ACTIVE needs a reason, stored with it; ACTIVE clears it. Each change is
// recorded; a refused one changes nothing.
func TestSetAccountState(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	id := openAccount(t, DefaultAccountGroup)
	key := strconv.FormatInt(id, 10)
	for _, tc := range []struct {
		state  fx.AccountState
		reason string
		want   string
	}{
		{"FROZEN", "x", "state must be ACTIVE, CLOSE_ONLY or DISABLED"},
		{fx.AccountCloseOnly, " ", "reason is required for CLOSE_ONLY"},
		{fx.AccountDisabled, "", "reason is required for DISABLED"},
		{fx.AccountDisabled, strings.Repeat("é", 256), "at most 255 characters"},
	} {
		err := svc.SetAccountState(ctx, id, tc.state, tc.reason)
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("%s %q: %v; want %s naming %q", tc.state, tc.reason, err, fx.EINVALID, tc.want)
		}
	}
	if got := accountRow(t, id); got != DefaultAccountGroup+" ACTIVE -" || auditCount(t, "account", key) != 0 {
		t.Fatalf("refused states changed something: %s", got)
	}
	if err := svc.SetAccountState(ctx, 1<<40, fx.AccountActive, ""); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("unknown account: %v", err)
	}
	if err := svc.SetAccountState(ctx, id, fx.AccountCloseOnly, "KYC review"); err != nil {
		t.Fatal(err)
	}
	if got := accountRow(t, id); got != DefaultAccountGroup+" CLOSE_ONLY KYC review" {
		t.Fatalf("account %s", got)
	}
	if err := svc.SetAccountState(ctx, id, fx.AccountActive, "documents received"); err != nil {
		t.Fatal(err)
	}
	if got := accountRow(t, id); got != DefaultAccountGroup+" ACTIVE -" || auditCount(t, "account", key) != 2 {
		t.Fatalf("account %s, %d audit rows", got, auditCount(t, "account", key))
	}
}

func fxPercent(n int64) decimal.Decimal { return decimal.NewFromInt(n) }
