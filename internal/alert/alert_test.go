package alert_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/dbtest"
)

var (
	testDB *sql.DB
	seq    atomic.Int64
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	db, closeDB, err := dbtest.NewMigrated("alert")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeDB()
	testDB = db
	return m.Run()
}

// code gives each test its own alert codes, so tests share the table and still run in parallel.
func code(t *testing.T, name string) string {
	return fmt.Sprintf("t%d-%s", seq.Add(1), name)
}

func inbox() *alert.Inbox { return alert.NewInbox(testDB, slog.New(slog.DiscardHandler)) }

func only(t *testing.T, in *alert.Inbox, c string) []alert.Alert {
	t.Helper()
	all, err := in.List(context.Background(), alert.Filter{Code: c})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// Repeats of an unresolved code make one row whose count, lastSeenAt, message and details follow
// the latest raise; resolving closes it and the next raise is a new incident.
func TestRaiseDeduplicatesWhileUnresolved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := inbox()
	c := code(t, "dedup")
	if err := in.Raise(ctx, c, alert.Warning, "first", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if err := in.Raise(ctx, c, alert.Critical, "second", map[string]any{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if err := in.Raise(ctx, c, alert.Critical, "third", map[string]any{"n": 3}); err != nil {
		t.Fatal(err)
	}
	all := only(t, in, c)
	if len(all) != 1 {
		t.Fatalf("want one row, got %d", len(all))
	}
	a := all[0]
	if a.Count != 3 || a.Message != "third" || a.Severity != alert.Critical || a.Status != alert.Open {
		t.Fatalf("row = %+v", a)
	}
	if string(a.Details) != `{"n":3}` {
		t.Fatalf("details = %s", a.Details)
	}
	if a.LastSeenAt.Before(a.FirstSeenAt) {
		t.Fatalf("lastSeenAt %v before firstSeenAt %v", a.LastSeenAt, a.FirstSeenAt)
	}

	if err := in.Resolve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := in.Resolve(ctx, c); err != nil { // nothing open: not an error
		t.Fatal(err)
	}
	if err := in.Raise(ctx, c, alert.Warning, "again", nil); err != nil {
		t.Fatal(err)
	}
	all = only(t, in, c)
	if len(all) != 2 {
		t.Fatalf("want the resolved row and a new one, got %d", len(all))
	}
	if all[0].Status != alert.Open || all[0].Count != 1 || string(all[0].Details) != "{}" {
		t.Fatalf("new incident = %+v", all[0])
	}
	if all[1].Status != alert.Resolved || all[1].ResolvedAt == nil || all[1].Count != 3 {
		t.Fatalf("old incident = %+v", all[1])
	}
}

// Two processes raising at once must still make one row: the table, not the caller, dedups.
func TestRaiseConcurrentMakesOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := code(t, "race")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- inbox().Raise(ctx, c, alert.Critical, "x", nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	all := only(t, inbox(), c)
	if len(all) != 1 || all[0].Count != 16 {
		t.Fatalf("want one row counted 16 times, got %+v", all)
	}
}

// An acknowledged alert stays deduplicated and keeps its first acknowledgement; a resolved one
// cannot be acknowledged; a missing one is not found.
func TestAcknowledgeKeepsTheFirstAndRefusesResolved(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	in := inbox()
	c := code(t, "ack")
	if err := in.Raise(ctx, c, alert.Critical, "m", nil); err != nil {
		t.Fatal(err)
	}
	id := only(t, in, c)[0].ID

	a, err := in.Acknowledge(ctx, id, "ops-anna")
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != alert.Acknowledged || a.AcknowledgedBy != "ops-anna" || a.AcknowledgedAt == nil {
		t.Fatalf("after ack: %+v", a)
	}
	if a, err = in.Acknowledge(ctx, id, "ops-bob"); err != nil || a.AcknowledgedBy != "ops-anna" {
		t.Fatalf("second ack: %+v, %v", a, err)
	}
	if err := in.Raise(ctx, c, alert.Critical, "m2", nil); err != nil {
		t.Fatal(err)
	}
	if all := only(t, in, c); len(all) != 1 || all[0].Count != 2 || all[0].Status != alert.Acknowledged {
		t.Fatalf("raise while acknowledged: %+v", all)
	}

	if err := in.Resolve(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Acknowledge(ctx, id, "ops-anna"); fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("ack resolved: want conflict, got %v", err)
	}
	if _, err := in.Acknowledge(ctx, 1<<40, "ops-anna"); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("ack missing: want not found, got %v", err)
	}
	if _, err := in.Acknowledge(ctx, id, "  "); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("ack by nobody: want invalid, got %v", err)
	}
}

// Filters narrow by status and code; bad input is the caller's to fix.
func TestListFiltersByStatusAndCode(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{Via: "test"})
	in := inbox()
	open, acked, resolved := code(t, "open"), code(t, "acked"), code(t, "resolved")
	for _, c := range []string{open, acked, resolved} {
		if err := in.Raise(ctx, c, alert.Info, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Acknowledge(ctx, only(t, in, acked)[0].ID, "ops"); err != nil {
		t.Fatal(err)
	}
	if err := in.Resolve(ctx, resolved); err != nil {
		t.Fatal(err)
	}
	codesWith := func(sts ...alert.Status) map[string]bool {
		all, err := in.List(ctx, alert.Filter{Statuses: sts, Limit: alert.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, a := range all {
			got[a.Code] = true
		}
		return got
	}
	if got := codesWith(alert.Open); !got[open] || got[acked] || got[resolved] {
		t.Fatalf("OPEN: %v", got)
	}
	if got := codesWith(alert.Open, alert.Acknowledged); !got[open] || !got[acked] || got[resolved] {
		t.Fatalf("OPEN,ACKNOWLEDGED: %v", got)
	}
	if got := codesWith(alert.Resolved); got[open] || got[acked] || !got[resolved] {
		t.Fatalf("RESOLVED: %v", got)
	}
	if _, err := in.List(ctx, alert.Filter{Statuses: []alert.Status{"CLOSED"}}); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("unknown status: %v", err)
	}
	if err := in.Raise(ctx, "", alert.Info, "m", nil); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("empty code: %v", err)
	}
	if err := in.Raise(ctx, strings.Repeat("x", 65), alert.Info, "m", nil); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("long code: %v", err)
	}
	if err := in.Raise(ctx, open, "loud", "m", nil); fx.ErrorCode(err) != fx.EINVALID {
		t.Fatalf("unknown severity: %v", err)
	}
	all, err := in.List(ctx, alert.Filter{Code: open})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(all[0])
	for _, field := range []string{`"firstSeenAt"`, `"lastSeenAt"`, `"count":1`, `"status":"OPEN"`, `"severity":"info"`, `"details":{}`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON %s lacks %s", b, field)
		}
	}
}

// An acknowledgement is one audit row with the alert's status before and after; a refused one
// (resolved, missing, no actor) records none.
func TestAcknowledgeIsAudited(t *testing.T) {
	t.Parallel()
	ctx := audit.WithActor(context.Background(), audit.Actor{UserID: 3, Via: "api"})
	in := inbox()
	c := code(t, "audited")
	if err := in.Raise(ctx, c, alert.Warning, "m", nil); err != nil {
		t.Fatal(err)
	}
	id := only(t, in, c)[0].ID
	if _, err := in.Acknowledge(context.Background(), id, "ops"); !errors.Is(err, audit.ErrNoActor) {
		t.Fatalf("no actor: %v", err)
	}
	if a, _ := in.Get(ctx, id); a.Status != alert.Open {
		t.Fatalf("a refused acknowledgement left the alert %s", a.Status)
	}
	if _, err := in.Acknowledge(ctx, id, "ops"); err != nil {
		t.Fatal(err)
	}
	es, err := audit.List(ctx, testDB, audit.Filter{EntityType: "alert", EntityID: strconv.FormatInt(id, 10)})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Action != "alert.acknowledge" || !strings.Contains(string(es[0].Before), `"status":"OPEN"`) ||
		!strings.Contains(string(es[0].After), `"status":"ACKNOWLEDGED","acknowledgedBy":"ops"`) {
		t.Fatalf("audit rows = %+v", es)
	}
}
