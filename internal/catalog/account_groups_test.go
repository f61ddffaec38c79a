package catalog

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
)

// asAdmin is a context whose changes are recorded as a test's.
func asAdmin() context.Context {
	return audit.WithActor(context.Background(), audit.Actor{Via: "test"})
}

var groupSeq atomic.Int64

// uniqueGroup is a group name no other test uses.
func uniqueGroup(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e6, groupSeq.Add(1))
}

// auditRows counts the audit rows of one entity.
func auditCount(t *testing.T, entityType, id string) int {
	t.Helper()
	var n int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_audit` WHERE `entityType` = ? AND `entityId` = ?", entityType, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// groupRow is the stored group, as text, to compare before and after a refused change.
func groupRow(t *testing.T, name string) string {
	t.Helper()
	var s string
	err := testDB.QueryRow("SELECT CONCAT_WS(' ', `leverageMax`, `marginCallLevel`, `stopOutLevel`, `executionMode`, `swapFreeDefault`, "+
		"`negativeBalanceProtection`, COALESCE(`maxPendingOrders`, 'null')) FROM `fx_account_group` WHERE `name` = ?", name).Scan(&s)
	if err != nil {
		return "missing"
	}
	return s
}

// openAccount writes an account in group straight to the table.
func openAccount(t *testing.T, group string) int64 {
	t.Helper()
	res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `accountGroup`, `currency`, `leverage`) VALUES (1, ?, 'USD', 100)", group)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

// A new group takes the schema's defaults for what the request leaves out (negative balance
// protection on, the desk's pending-order cap), is recorded once, and lists.
func TestCreateAccountGroupDefaults(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	name := uniqueGroup("create")
	g, err := svc.CreateAccountGroup(ctx, name, AccountGroupPatch{LeverageMax: ptr(100), SwapFreeDefault: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	want := "100 100.00 50.00 INTERNAL 1 1 null"
	if got := groupRow(t, name); got != want {
		t.Fatalf("stored %q, want %q", got, want)
	}
	if !g.NegativeBalanceProtection || g.MaxPendingOrders != nil || !g.SwapFreeDefault || g.Execution != fx.Internal {
		t.Fatalf("answered %+v", g)
	}
	if n := auditCount(t, "account_group", name); n != 1 {
		t.Fatalf("%d audit rows, want 1", n)
	}
	if _, err := svc.CreateAccountGroup(ctx, name, AccountGroupPatch{}); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("a second %q: %v; want %s", name, err, fx.ECONFLICT)
	}
	got, err := svc.AccountGroup(ctx, name)
	if err != nil || got.LeverageMax != 100 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if _, err := svc.AccountGroup(ctx, "nobody"); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("unknown group: %v", err)
	}
	// Without an actor nothing is written: the change must say who made it.
	if _, err := svc.CreateAccountGroup(context.Background(), uniqueGroup("anon"), AccountGroupPatch{}); err == nil {
		t.Fatal("a change with no actor was written")
	}
}

// Every term is checked against its column and the rules before anything is written; the
// refusal names the field and its range, the group stays as it was and no audit row is written.
func TestAccountGroupTermsRangeChecked(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	name := uniqueGroup("ranges")
	if _, err := svc.CreateAccountGroup(ctx, name, AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	before := groupRow(t, name)
	d := func(s string) *decimal.Decimal { return ptr(decimal.RequireFromString(s)) }
	ext := fx.External
	bad := fx.ExecutionMode("HYBRID")
	for _, tc := range []struct {
		patch AccountGroupPatch
		code  string
		want  string
	}{
		{AccountGroupPatch{LeverageMax: ptr(0)}, fx.EINVALID, "leverageMax must be a whole number from 1 to 10000"},
		{AccountGroupPatch{LeverageMax: ptr(10001)}, fx.EINVALID, "from 1 to 10000"},
		{AccountGroupPatch{MarginCallLevel: d("100000")}, fx.EINVALID, "marginCallLevel must be a percentage from 0 to 99999.99"},
		{AccountGroupPatch{StopOutLevel: d("-1")}, fx.EINVALID, "stopOutLevel must be a percentage from 0"},
		{AccountGroupPatch{StopOutLevel: d("20.001")}, fx.EINVALID, "at most 2 decimals"},
		{AccountGroupPatch{StopOutLevel: d("120")}, fx.EINVALID, "marginCallLevel 100% must be at least stopOutLevel 120%"},
		{AccountGroupPatch{MarginCallLevel: d("40")}, fx.EINVALID, "must be at least stopOutLevel 50%"}, // against the stored level
		{AccountGroupPatch{SetMaxPendingOrders: true, MaxPendingOrders: ptr(0)}, fx.EINVALID, "maxPendingOrders must be a whole number of orders from 1 to 10000"},
		{AccountGroupPatch{Execution: &bad}, fx.EINVALID, "executionMode must be INTERNAL or EXTERNAL"},
		{AccountGroupPatch{Execution: &ext}, fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE)"},
	} {
		_, err := svc.UpdateAccountGroup(ctx, name, tc.patch)
		if fx.ErrorCode(err) != tc.code || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("update %+v: %v; want %s naming %q", tc.patch, err, tc.code, tc.want)
		}
		_, err = svc.CreateAccountGroup(ctx, uniqueGroup("bad"), tc.patch)
		if fx.ErrorCode(err) != tc.code || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("create %+v: %v; want %s naming %q", tc.patch, err, tc.code, tc.want)
		}
	}
	for _, bad := range []string{"", "has space", "/slash", strings.Repeat("x", 33)} {
		if _, err := svc.CreateAccountGroup(ctx, bad, AccountGroupPatch{}); fx.ErrorCode(err) != fx.EINVALID {
			t.Errorf("name %q: %v; want %s", bad, err, fx.EINVALID)
		}
	}
	if after := groupRow(t, name); after != before {
		t.Fatalf("refused changes wrote %s: %s → %s", name, before, after)
	}
	if n := auditCount(t, "account_group", name); n != 1 {
		t.Fatalf("%d audit rows after refused changes, want only the creation's", n)
	}
	if _, err := svc.UpdateAccountGroup(ctx, "nobody", AccountGroupPatch{LeverageMax: ptr(10)}); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("unknown group: %v", err)
	}
}

// A change is written and recorded with the group before and after; the accounts in the group
// are handed to the risk engine under the new terms from the audit row; the pending-order cap can be set
// and given back to the desk setting.
func TestUpdateAccountGroupReachesTheRiskEngine(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	r := newTermsRig(t)
	name := uniqueGroup("update")
	if _, err := svc.CreateAccountGroup(ctx, name, AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	id := openAccount(t, name)
	g, err := svc.UpdateAccountGroup(ctx, name, AccountGroupPatch{MarginCallLevel: ptr(decimal.NewFromInt(150)), StopOutLevel: ptr(decimal.NewFromInt(80)),
		SetMaxPendingOrders: true, MaxPendingOrders: ptr(3), NegativeBalanceProtection: ptr(false)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := groupRow(t, name), "500 150.00 80.00 INTERNAL 0 0 3"; got != want || *g.MaxPendingOrders != 3 {
		t.Fatalf("stored %q, want %q (answered %+v)", got, want, g)
	}
	if a, ok := accountTerms(r.pass(), id); !ok || a.Group != name || a.StopOutLevel != 80 || a.MarginCallLevel != 150 {
		t.Fatalf("the risk engine was told %+v (%v); want account %d's new terms", a, ok, id)
	}
	entries, err := audit.List(ctx, testDB, audit.Filter{EntityType: "account_group", EntityID: name})
	if err != nil || len(entries) != 2 || entries[0].Action != "account_group.update" ||
		!strings.Contains(string(entries[0].Before), `"stopOutLevel":"50"`) || !strings.Contains(string(entries[0].After), `"stopOutLevel":"80"`) {
		t.Fatalf("audit %v: %+v", err, entries)
	}
	// Giving the cap back to the desk setting changes no margin term: the engine is told the
	// terms it holds, which it ignores.
	if _, err := svc.UpdateAccountGroup(ctx, name, AccountGroupPatch{SetMaxPendingOrders: true}); err != nil {
		t.Fatal(err)
	}
	if got := groupRow(t, name); !strings.HasSuffix(got, " null") {
		t.Fatalf("cap not removed: %s", got)
	}
	if a, ok := accountTerms(r.pass(), id); ok && (a.StopOutLevel != 80 || a.MarginCallLevel != 150) {
		t.Fatalf("told %+v for a change of no margin term", a)
	}
}

// A group is deleted only when empty; the refusal counts its accounts and changes nothing. The
// default group, where accounts open, is never deleted.
func TestDeleteAccountGroupOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	name := uniqueGroup("delete")
	if _, err := svc.CreateAccountGroup(ctx, name, AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	id1, id2 := openAccount(t, name), openAccount(t, name)
	_, err := svc.DeleteAccountGroup(ctx, name)
	if fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(fx.ErrorMessage(err), "still holds 2 accounts") {
		t.Fatalf("delete with accounts: %v; want %s naming 2 accounts", err, fx.ECONFLICT)
	}
	if groupRow(t, name) == "missing" || auditCount(t, "account_group", name) != 1 {
		t.Fatal("a refused delete changed something")
	}
	for _, id := range []int64{id1, id2} {
		if err := svc.MoveAccount(ctx, id, DefaultAccountGroup); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.DeleteAccountGroup(ctx, name); err != nil {
		t.Fatal(err)
	}
	if groupRow(t, name) != "missing" || auditCount(t, "account_group", name) != 2 {
		t.Fatal("the group was not deleted and recorded")
	}
	if _, err := svc.DeleteAccountGroup(ctx, name); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := svc.DeleteAccountGroup(ctx, DefaultAccountGroup); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("delete default: %v", err)
	}
}
