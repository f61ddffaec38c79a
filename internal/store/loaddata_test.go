package store_test

import (
	"context"
	"strings"
	"testing"

	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
)

// LoadData writes what an INSERT would: every byte the format escapes comes back as it went in,
// NULL stays NULL; and what a local load would only warn about (a value that does not fit)
// fails it.
func TestLoadDataWritesWhatInsertWould(t *testing.T) {
	ctx := context.Background()
	d, err := dbtest.NewDatabase("store_loaddata")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	db, err := store.Connect(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if on, err := store.LocalInfile(ctx, db); err != nil || !on {
		t.Skipf("the server does not take local files (%v)", err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE `t` (`id` BIGINT NOT NULL PRIMARY KEY, `s` VARCHAR(64) NULL, `b` LONGTEXT NULL, `v` DECIMAL(12,4) NULL)"); err != nil {
		t.Fatal(err)
	}
	stmt := func(file string) string {
		return "LOAD DATA LOCAL INFILE '" + file + "' INTO TABLE `t` " + store.LoadDataFormat + " (`id`, `s`, `b`, `v`)"
	}
	values := []string{"plain", "tab\there", "new\nline", `back\slash`, "cr\rlf", "nul\x00byte", `\N`, "trailing\\", "é ü 中"}
	one := func(i int, args []any) []any {
		var b any = []byte(`{"k":"` + values[i] + `"}`)
		if i == 2 {
			b = nil
		}
		return append(args, int64(i+1), values[i], b, "12.5")
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.LoadData(ctx, tx, stmt, len(values), one); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT `id`, `s`, `b`, `v` FROM `t` ORDER BY `id`")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var s, v string
		var b *string
		if err := rows.Scan(&id, &s, &b, &v); err != nil {
			t.Fatal(err)
		}
		i := int(id - 1)
		if s != values[i] || v != "12.5000" {
			t.Errorf("row %d: %q, %q; want %q, 12.5000", id, s, v, values[i])
		}
		if want := `{"k":"` + values[i] + `"}`; (i == 2) != (b == nil) || b != nil && *b != want {
			t.Errorf("row %d: b = %v, want %q (NULL for row 3)", id, b, want)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(values) {
		t.Fatalf("%d rows, want %d", n, len(values))
	}

	// A value too long for its column: an INSERT is refused, a local load only warns.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = store.LoadData(ctx, tx, stmt, 1, func(i int, args []any) []any {
		return append(args, int64(100), strings.Repeat("x", 65), nil, "1")
	})
	if err == nil || !strings.Contains(err.Error(), "warned") {
		t.Fatalf("a value too long loaded with %v, want the warning as the error", err)
	}
}
