package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
)

// auditRows is the log's rows on entity, oldest first.
func auditRows(t *testing.T, entityType, entityID string) []audit.Entry {
	t.Helper()
	es, err := audit.List(context.Background(), testDB, audit.Filter{EntityType: entityType, EntityID: entityID, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
		es[i], es[j] = es[j], es[i]
	}
	return es
}

// field reads one JSON field of a before/after record as text.
func field(t *testing.T, raw json.RawMessage, name string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("record %s: %v", raw, err)
	}
	v, _ := m[name].(string)
	return v
}

// Every catalog write records its audit row in its own transaction, with the entity before and
// after: one row per instrument patched, per setting written, per execution-mode change, group
// creation and account move. A refused write records nothing, and a write with no actor is
// refused and changes nothing.
func TestCatalogWritesAreAudited(t *testing.T) {
	t.Parallel()
	actor := audit.Actor{TokenID: 0, UserID: 42, Via: "test", RequestID: "req-1"}
	ctx := audit.WithActor(context.Background(), actor)
	a, err := NewAdmin(AdminConfig{DB: testDB, Cache: NewCache(testDB, time.Minute), Venue: true})
	if err != nil {
		t.Fatal(err)
	}

	// Instruments: two patches in one request are two rows, each with its terms before and after.
	before := len(auditRows(t, "instrument", "EURGBP"))
	lev := 77
	halted := fx.InstrumentStatus("HALTED")
	if _, err := a.PutInstruments(ctx, []InstrumentPatch{{Symbol: "EURGBP", LeverageMax: &lev}, {Symbol: "EURGBP", Status: &halted}}); err != nil {
		t.Fatal(err)
	}
	rows := auditRows(t, "instrument", "EURGBP")[before:]
	if len(rows) != 2 || rows[0].Action != "instrument.update" || rows[0].ActorVia != "test" || rows[0].ActorUserID == nil || *rows[0].ActorUserID != 42 ||
		rows[0].RequestID == nil || *rows[0].RequestID != "req-1" {
		t.Fatalf("instrument rows = %+v", rows)
	}
	var b0, a0, a1 instrumentTerms
	json.Unmarshal(rows[0].Before, &b0)
	json.Unmarshal(rows[0].After, &a0)
	json.Unmarshal(rows[1].After, &a1)
	if a0.LeverageMax != 77 || b0.LeverageMax == 77 || a0.Status != b0.Status || a1.Status != halted || a1.LeverageMax != 77 {
		t.Fatalf("instrument records: before %+v, after %+v, then %+v", b0, a0, a1)
	}
	// Refused: one good patch beside a bad one writes no row at all.
	if _, err := a.PutInstruments(ctx, []InstrumentPatch{{Symbol: "EURGBP", LeverageMax: &lev}, {Symbol: "EURGBP", VolumeStep: ptr(decimal.RequireFromString("0.03"))}}); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("bad patch: %v", err)
	}
	if n := len(auditRows(t, "instrument", "EURGBP")); n != before+2 {
		t.Fatalf("a refused patch left %d rows, want %d", n, before+2)
	}
	// No actor: refused, nothing written.
	lev2 := 78
	if _, err := a.PutInstruments(context.Background(), []InstrumentPatch{{Symbol: "EURGBP", LeverageMax: &lev2}}); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	var got int
	testDB.QueryRow("SELECT `leverageMax` FROM `fx_instrument` WHERE `symbol` = 'EURGBP'").Scan(&got)
	if got != 77 {
		t.Fatalf("a write with no actor changed leverageMax to %d", got)
	}

	// Settings: one row per setting; a setting never stored has no before.
	s := NewSettings(testDB, slog.New(slog.DiscardHandler))
	if _, err := s.Put(ctx, map[string]string{SettingMaxAccountsPerUser: "12"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, map[string]string{SettingMaxAccountsPerUser: "13"}); err != nil {
		t.Fatal(err)
	}
	rows = auditRows(t, "setting", SettingMaxAccountsPerUser)
	if len(rows) != 2 || rows[0].Before != nil || field(t, rows[0].After, "value") != "12" || field(t, rows[1].Before, "value") != "12" || field(t, rows[1].After, "value") != "13" {
		t.Fatalf("setting rows = %+v", rows)
	}
	if _, err := s.Put(ctx, map[string]string{SettingMaxAccountsPerUser: "0"}); fx.ErrorCode(err) != fx.EINVALID || len(auditRows(t, "setting", SettingMaxAccountsPerUser)) != 2 {
		t.Fatalf("a refused setting: %v, rows %d", err, len(auditRows(t, "setting", SettingMaxAccountsPerUser)))
	}

	// Account groups: a creation, then a mode change (an update), each one row.
	if err := a.EnsureAccountGroup(ctx, "audit-ab", fx.External); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetExecutionMode(ctx, "audit-ab", fx.Internal); err != nil {
		t.Fatal(err)
	}
	rows = auditRows(t, "account_group", "audit-ab")
	if len(rows) != 2 || rows[0].Action != "account_group.create" || rows[0].Before != nil || field(t, rows[0].After, "executionMode") != "EXTERNAL" ||
		rows[1].Action != "account_group.update" || field(t, rows[1].Before, "executionMode") != "EXTERNAL" || field(t, rows[1].After, "executionMode") != "INTERNAL" {
		t.Fatalf("account group rows = %+v", rows)
	}
	if _, err := a.SetExecutionMode(ctx, "audit-nosuch", fx.Internal); fx.ErrorCode(err) != fx.ENOTFOUND || len(auditRows(t, "account_group", "audit-nosuch")) != 0 {
		t.Fatalf("unknown group: %v", err)
	}

	// An account move: its group before and after.
	res, err := testDB.Exec("INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (4242, 'USD', 100)")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	if err := a.MoveAccount(ctx, id, "audit-ab"); err != nil {
		t.Fatal(err)
	}
	rows = auditRows(t, "account", decimal.NewFromInt(id).String())
	if len(rows) != 1 || rows[0].Action != "account.move" || field(t, rows[0].Before, "group") != "default" || field(t, rows[0].After, "group") != "audit-ab" {
		t.Fatalf("account move rows = %+v", rows)
	}
	if err := a.MoveAccount(ctx, id+1000000, "audit-ab"); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("move of an unknown account: %v", err)
	}
}
