package sqlrec

import (
	"context"
	"slices"
	"strings"
	"testing"

	"fxdesk/internal/testkit/dbtest"
)

// The checker on planted plans, over a real table of 3,000 rows recorded through the real
// driver: a read on an unindexed column is a full scan, a third of the table sorted a filesort,
// and reads on an index pass, as does a sort of one owner's ten rows; a table at or below the
// bound passes whatever its plan. A
// multi-statement read is split into its statements, each with its own arguments.
func TestCheckFailsOnAPlantedFullScanAndFilesort(t *testing.T) {
	ctx := context.Background()
	d, err := dbtest.NewDatabase("sqlrec")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Drop() })
	db, rec, err := Open(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, s := range []string{
		"CREATE TABLE `big` (`id` BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, `owner` BIGINT NOT NULL, `grp` BIGINT NOT NULL, `note` VARCHAR(20) NOT NULL, KEY `idx_big_owner` (`owner`, `id`), KEY `idx_big_grp` (`grp`, `id`))",
		"CREATE TABLE `small` (`id` BIGINT NOT NULL PRIMARY KEY, `note` VARCHAR(20) NOT NULL)",
		"INSERT INTO `big` (`owner`, `grp`, `note`) " + strings.TrimSuffix(strings.Repeat("SELECT 0, 0, 'n' UNION ALL ", 3000), " UNION ALL "),
		"UPDATE `big` SET `owner` = `id` % 300, `grp` = `id` % 3, `note` = CONCAT('n', `id`)",
		"INSERT INTO `small` VALUES (1, 'a'), (2, 'b'), (3, 'c')",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	tables, err := Tables(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if tables["big"] != 3000 || tables["small"] != 3 {
		t.Fatalf("table rows %v", tables)
	}
	rec.Take()

	cases := []struct {
		query string
		args  []any
		why   string // "" when the plan passes
	}{
		{"SELECT `id` FROM `big` WHERE `note` = ?", []any{"n7"}, "full scan"},
		// a third of the table sorted for ten rows
		{"SELECT b.`id`, b.`note` FROM `big` b WHERE b.`grp` = ? ORDER BY b.`note` LIMIT 10", []any{int64(1)}, "sort or temporary table"},
		{"SELECT `id` FROM `big` WHERE `owner` = ? ORDER BY `id` DESC LIMIT 10", []any{int64(7)}, ""},
		{"SELECT `id` FROM `big` WHERE `id` < ? ORDER BY `id` DESC LIMIT 10", []any{int64(500)}, ""},
		{"SELECT s.`note` FROM `small` s WHERE s.`note` = ? ORDER BY s.`note`", []any{"a"}, ""},
		// one owner's ten rows sorted: a sort of fewer rows than the bound
		{"SELECT `id`, `note` FROM `big` WHERE `owner` = ? ORDER BY `note`", []any{int64(8)}, ""},
	}
	for _, c := range cases {
		rec.Tag(c.query)
		rows, err := db.QueryContext(ctx, c.query, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	got := rec.Take()
	if len(got) != len(cases) {
		t.Fatalf("recorded %d reads, want %d: %v", len(got), len(cases), got)
	}
	for i, c := range cases {
		if got[i].Text != c.query || got[i].Tag != c.query || !slices.Equal(got[i].Args, c.args) {
			t.Errorf("recorded %+v, want %q with %v", got[i], c.query, c.args)
		}
		problems, err := Check(ctx, db, got[i], tables, 500)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.why == "" && len(problems) > 0:
			t.Errorf("%s: %v, want no problem", c.query, problems)
		case c.why != "" && (len(problems) == 0 || problems[0].Why != c.why || problems[0].Table != "big"):
			t.Errorf("%s: %v, want %q over big", c.query, problems, c.why)
		}
	}

	// A batch: the write is not kept, each read is, with its own arguments.
	rows, err := db.QueryContext(ctx, "UPDATE `small` SET `note` = ? WHERE `id` = ?; SELECT `note` FROM `small` WHERE `id` = ?; SELECT 'a;?' FROM `big` WHERE `owner` = ? LIMIT 1", "x", 1, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() || rows.NextResultSet() {
	}
	rows.Close()
	batch := rec.Take()
	if len(batch) != 2 || !strings.HasPrefix(batch[0].Text, "SELECT `note`") || !slices.Equal(batch[0].Args, []any{int64(2)}) ||
		!strings.HasPrefix(batch[1].Text, "SELECT 'a;?'") || !slices.Equal(batch[1].Args, []any{int64(3)}) {
		t.Errorf("batch recorded as %+v", batch)
	}
}
