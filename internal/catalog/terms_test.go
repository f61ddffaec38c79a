package catalog

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/risk"
)

// termsRig is a TermsFollower over the test database, started at the log's current end as
// the holder starts it, recording what it hands the engine. Tests run in parallel on one
// database, so the rig hears other tests' changes too; each looks only at its own entities.
type termsRig struct {
	t   *testing.T
	f   *TermsFollower
	mu  sync.Mutex
	got []risk.Change
	now time.Time
}

func newTermsRig(t *testing.T) *termsRig {
	t.Helper()
	r := &termsRig{t: t, now: time.Unix(1_700_000_000, 0)}
	f, err := NewTermsFollower(TermsFollowerConfig{DB: testDB, Cache: NewCache(testDB, time.Minute), Now: func() time.Time {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.now
	}, Apply: func(_ context.Context, cs ...risk.Change) {
		r.mu.Lock()
		r.got = append(r.got, cs...)
		r.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if f.low, err = audit.Settled(context.Background(), testDB, -time.Hour); err != nil { // every row so far
		t.Fatal(err)
	}
	r.f = f
	return r
}

// pass runs one read of the log and returns what it handed the engine.
func (r *termsRig) pass() []risk.Change {
	r.t.Helper()
	if err := r.f.Pass(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func (r *termsRig) advance(d time.Duration) {
	r.mu.Lock()
	r.now = r.now.Add(d)
	r.mu.Unlock()
}

// accountTerms is the last terms change of account id among cs.
func accountTerms(cs []risk.Change, id int64) (risk.Account, bool) {
	var a risk.Account
	ok := false
	for _, c := range cs {
		if c.Kind == risk.AccountTermsChanged && c.Account.ID == id {
			a, ok = c.Account, true
		}
	}
	return a, ok
}

// groupTerms is the last symbol terms of account group g among cs.
func groupTerms(cs []risk.Change, g string) (risk.GroupTerms, bool) {
	var out risk.GroupTerms
	ok := false
	for _, c := range cs {
		if c.Kind == risk.GroupTermsSet && c.GroupTerms.Group == g {
			out, ok = c.GroupTerms, true
		}
	}
	return out, ok
}

func engineInstrument(cs []risk.Change, symbol string) (risk.Instrument, bool) {
	var out risk.Instrument
	ok := false
	for _, c := range cs {
		if c.Kind == risk.InstrumentUpserted && c.Instrument.Symbol == symbol {
			out, ok = c.Instrument, true
		}
	}
	return out, ok
}

// Every kind of change that alters marking reaches the engine from its audit row alone: a
// move (with the account's new group), a group's levels (for each of its accounts), an
// override set and removed, a symbol group's markup, an instrument's leverage cap.
func TestTermsFollowerHandsOverEveryMarkingChange(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	r := newTermsRig(t)
	capped, plain := uniqueGroup("capped"), uniqueGroup("plain")
	for _, g := range []string{capped, plain} {
		if _, err := svc.CreateAccountGroup(ctx, g, AccountGroupPatch{}); err != nil {
			t.Fatal(err)
		}
	}
	id := openAccount(t, capped)
	if _, _, err := svc.PutOverride(ctx, Override{AccountGroup: capped, Symbol: "EURUSD", LeverageMax: ptr(10), MarkupPoints: ptr(decimal.NewFromInt(15))}); err != nil {
		t.Fatal(err)
	}
	got := r.pass()
	if g, ok := groupTerms(got, capped); !ok || g.Symbols["EURUSD"].LeverageMax != 10 || g.Symbols["EURUSD"].Markup != 0.00015 {
		t.Fatalf("override: the engine got %+v (%v)", g, ok)
	}

	if err := svc.MoveAccount(ctx, id, plain); err != nil {
		t.Fatal(err)
	}
	if a, ok := accountTerms(r.pass(), id); !ok || a.Group != plain || a.StopOutLevel != 50 {
		t.Fatalf("move: the engine got %+v (%v); want account %d in %s", a, ok, id, plain)
	}

	if _, err := svc.UpdateAccountGroup(ctx, plain, AccountGroupPatch{StopOutLevel: ptr(decimal.NewFromInt(80)), MarginCallLevel: ptr(decimal.NewFromInt(120)),
		LeverageMax: ptr(30)}); err != nil {
		t.Fatal(err)
	}
	if a, ok := accountTerms(r.pass(), id); !ok || a.Group != plain || a.StopOutLevel != 80 || a.MarginCallLevel != 120 || a.GroupLeverage != 30 {
		t.Fatalf("group edit: the engine got %+v (%v)", a, ok)
	}

	if err := svc.DeleteOverride(ctx, capped, "EURUSD", ""); err != nil {
		t.Fatal(err)
	}
	if g, ok := groupTerms(r.pass(), capped); !ok || len(g.Symbols) != 0 {
		t.Fatalf("override removed: the engine got %+v (%v); want no terms of the group's own", g, ok)
	}

	if _, err := svc.PutInstruments(ctx, []InstrumentPatch{{Symbol: "USDSGD", LeverageMax: ptr(33)}}); err != nil {
		t.Fatal(err)
	}
	if in, ok := engineInstrument(r.pass(), "USDSGD"); !ok || in.LeverageMax != 33 {
		t.Fatalf("instrument: the engine got %+v (%v)", in, ok)
	}

	// A row of no marking concern (a state) hands over nothing of this account's.
	if err := svc.SetAccountState(ctx, id, "CLOSE_ONLY", "review"); err != nil {
		t.Fatal(err)
	}
	if a, _ := accountTerms(r.pass(), id); a.Group != "" && a.Group != plain {
		t.Fatalf("state: the engine got %+v", a)
	}
}

// A transaction that took its audit id before another committed, and commits after the
// follower read past it, is still handed over: ids are taken at INSERT, not at COMMIT. A gap
// that never fills (a rollback) holds the cursor only for the grace period.
func TestTermsFollowerWaitsForAGapInTheLog(t *testing.T) {
	t.Parallel()
	ctx := asAdmin()
	svc := newAdmin(t)
	r := newTermsRig(t)
	from, slow, fast := uniqueGroup("from"), uniqueGroup("slow"), uniqueGroup("fast")
	for _, g := range []string{from, slow, fast} {
		if _, err := svc.CreateAccountGroup(ctx, g, AccountGroupPatch{}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := openAccount(t, from), openAccount(t, from)
	r.pass()

	// The slow move takes its audit id and stays open while the fast one commits.
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", slow, a); err != nil {
		t.Fatal(err)
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "account.move", EntityType: "account", EntityID: itoa(a), After: slow}); err != nil {
		t.Fatal(err)
	}
	if err := svc.MoveAccount(ctx, b, fast); err != nil {
		t.Fatal(err)
	}
	if got, ok := accountTerms(r.pass(), b); !ok || got.Group != fast {
		t.Fatalf("the fast move: %+v (%v)", got, ok)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, ok := accountTerms(r.pass(), a); !ok || got.Group != slow {
		t.Fatalf("the slow move, committed after a later id was read: %+v (%v); want account %d in %s", got, ok, a, slow)
	}

	// A rolled-back id: the cursor stays below it until the grace period has passed.
	tx, err = testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "account.move", EntityType: "account", EntityID: itoa(a), After: from}); err != nil {
		t.Fatal(err)
	}
	var lost int64
	if err := tx.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&lost); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if err := svc.MoveAccount(ctx, b, from); err != nil {
		t.Fatal(err)
	}
	r.pass()
	if r.f.low >= lost {
		t.Fatalf("cursor %d moved past the open gap at %d at once", r.f.low, lost)
	}
	r.advance(TermsGrace)
	r.pass()
	if r.f.low < lost {
		t.Fatalf("cursor %d still below the gap at %d after the grace period", r.f.low, lost)
	}
}

func itoa(id int64) string { return decimal.NewFromInt(id).String() }
