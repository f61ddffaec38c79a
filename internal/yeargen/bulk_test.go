package yeargen

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// A fill through the loader takes MariaDB's bulk path for every big table — fx_order's
// migrations left a hidden metadata record in its empty table that refused it until the
// generator rebuilt the table (docs/operations.md, «A year of data») — and leaves the schema
// exactly as the migrations made it: the rebuild writes the same definition anew.
func TestFillLoaderBulkKeepsSchema(t *testing.T) {
	ctx := context.Background()
	d, err := dbtest.NewDatabase("yeargen_bulk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	migrated, err := store.OpenMigrated(ctx, d.DSN, discard())
	if err != nil {
		t.Fatal(err)
	}
	defer migrated.Close()
	before := createTables(t, migrated)
	var version string
	if err := migrated.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}

	loader, err := OpenLoader(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer loader.Close()
	// Every big table more than one statement long, so that a row-by-row load would show it.
	size := Size{Accounts: 60, OpenPositions: 300, ClosedPositions: 9000, RestingOrders: 100,
		Events: 20000, Audit: 1000, Days: 30, BigClosed: 1000, SmallClosed: 100}
	var logged dbtest.LogBuffer
	if _, err := Fill(ctx, loader, size, 5, testEnd, slog.New(slog.NewJSONHandler(&logged, nil))); err != nil {
		t.Fatal(err)
	}

	after := createTables(t, migrated)
	for name, def := range before {
		if after[name] != def {
			t.Errorf("%s after the fill:\n%s\nmigrated:\n%s", name, after[name], def)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d tables after the fill, %d migrated", len(after), len(before))
	}

	bulk := map[string]string{}
	lines := bufio.NewScanner(strings.NewReader(logged.String()))
	for lines.Scan() {
		var rec struct {
			Msg   string `json:"msg"`
			Table string `json:"table"`
			Bulk  *bool  `json:"bulk"`
		}
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q: %v", lines.Text(), err)
		}
		if rec.Msg == "yeargen: table written" {
			bulk[rec.Table] = "unknown"
			if rec.Bulk != nil {
				bulk[rec.Table] = strconv.FormatBool(*rec.Bulk)
			}
		}
	}
	if !bulkLoads(version) {
		t.Logf("server %s: no bulk load into an empty table (MariaDB 10.7 and later have it); paths %v", version, bulk)
		return
	}
	t.Logf("paths: %v", bulk)
	for _, name := range []string{"fx_order", "fx_position", "fx_deal", "fx_event"} {
		if bulk[name] != "true" {
			t.Errorf("%s loaded with bulk=%s, want true (server %s)", name, bulk[name], version)
		}
	}
}

// createTables is SHOW CREATE TABLE of every table of db's database, without the table's next
// AUTO_INCREMENT value (the rows' doing, not the schema's).
func createTables(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "SELECT `TABLE_NAME` FROM `information_schema`.`TABLES` WHERE `TABLE_SCHEMA` = DATABASE() AND `TABLE_TYPE` = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	next := regexp.MustCompile(` AUTO_INCREMENT=\d+`)
	defs := map[string]string{}
	for _, n := range names {
		var name, def string
		if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE `"+n+"`").Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		defs[n] = next.ReplaceAllString(def, "")
	}
	return defs
}

// bulkLoads is whether the server named by VERSION() bulk-loads into an empty table: MariaDB
// from 10.7.
func bulkLoads(version string) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return err1 == nil && err2 == nil && (major > 10 || major == 10 && minor >= 7)
}
