package retention

import (
	"path"
	"regexp"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// moneyTables are the records the desk keeps hot for ever (docs/operations.md, «Retention»):
// the ledger, what it books, and the end of day that reconciles it.
var moneyTables = []string{"fx_deal", "fx_position", "fx_order", "fx_swap_charge", "fx_money_request",
	"fx_eod_account", "fx_eod_symbol", "fx_eod_day", "fx_eod_price", "fx_deal_venue_fill"}

// deletes matches a statement that deletes rows of table.
func deletes(table string) *regexp.Regexp {
	t := regexp.QuoteMeta(table)
	return regexp.MustCompile("(?is)\\bDELETE\\b[^;]*?\\bFROM\\b[^;]*?`?\\b" + t + "\\b`?|\\bTRUNCATE\\b[^;]*?\\b" + t + "\\b")
}

// The detector can fail: it sees a delete of a money table, and not one of a table whose name
// only starts with it.
func TestMoneyDeleteDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"DELETE FROM `fx_deal` WHERE `id` < ?", true},
		{"delete d from fx_position as p join fx_deal as d on d.positionId = p.id", true},
		{"TRUNCATE TABLE `fx_deal`", true},
		{"DELETE FROM `fx_deal_venue_fill_x` WHERE 1", false},
		{"SELECT `id` FROM `fx_deal`", false},
	} {
		if got := deletes("fx_deal").MatchString(c.sql); got != c.want {
			t.Errorf("deletes(fx_deal)(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// notMoney are the deletes of a money table's rows that were never money records, each with why,
// by the package that may send it.
var notMoney = map[string]string{
	// An A-book order's identity row, written before it is sent and removed when it provably
	// never left the process: no fill, no deal, no nonce a trader holds an answer for.
	"DELETE FROM `fx_order` WHERE `id` = ? AND `status` = 'SENDING' AND `venueOrderId` IS NULL": "internal/trading",
}

// Money records are never deleted: no statement in the module's non-test sources deletes from
// a money table but notMoney's. Archiving them would need every idempotency key and nonce kept
// unusable elsewhere; the decision to keep them hot is this test.
func TestMoneyRecordsAreNeverDeleted(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	if len(texts) < 100 {
		t.Fatalf("the walk saw %d statements: it is not seeing the module", len(texts))
	}
	for _, table := range moneyTables {
		re := deletes(table)
		for _, s := range texts {
			if re.MatchString(s.Text) && notMoney[s.Text] != path.Dir(s.File) {
				t.Errorf("%s deletes from %s, a money record kept hot (docs/operations.md, «Retention»): %s", s.Where(), table, s.Text)
			}
		}
	}
}
