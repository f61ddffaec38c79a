package audit

import (
	"path"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// writesAudit matches any statement that writes fx_audit.
var writesAudit = sqlsource.WritesTable("fx_audit")

func TestWritesAuditDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{insertSQL, true},
		{"insert ignore into fx_audit (a) values (1)", true},
		{"UPDATE `fx_audit` SET `after` = NULL", true},
		{"DELETE FROM `fx_audit` WHERE `id` = ?", true},
		{"TRUNCATE TABLE fx_audit", true},
		{"SELECT `id` FROM `fx_audit` ORDER BY `id` DESC", false},
		{"INSERT INTO `fx_audit_archive` (`id`) VALUES (?)", false},
		{archiveCopySQL, false},
		{archiveRemoveSQL, true},
	} {
		if got := writesAudit.MatchString(c.sql); got != c.want {
			t.Errorf("writesAudit(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// The log is append-only: the only statements in the module's non-test sources that write
// fx_audit are this package's INSERT and its archive's move (the DELETE of exactly the rows
// fx_audit_archive holds). No update, no other delete, no second writer.
func TestTheAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	inserts := 0
	for _, s := range texts {
		if !writesAudit.MatchString(s.Text) {
			continue
		}
		if path.Dir(s.File) == "internal/audit" && s.Text == insertSQL {
			inserts++
			continue
		}
		if path.Dir(s.File) == "internal/audit" && s.Text == archiveRemoveSQL {
			continue
		}
		t.Errorf("%s writes fx_audit other than through audit.Row: %s", s.Where(), s.Text)
	}
	if inserts != 1 {
		t.Errorf("found audit's INSERT %d times, want once: the walk is not seeing it", inserts)
	}
}
