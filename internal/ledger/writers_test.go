package ledger

import (
	"path"
	"regexp"
	"strings"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// writesMoney reports whether SQL text writes the ledger: any INSERT, REPLACE, UPDATE or DELETE
// on fx_deal, or an UPDATE of fx_account that assigns its balance or its balanceVersion (the
// version the risk engine follows balances by moves only with the balance).
func writesMoney(sqlText string) bool {
	for _, m := range dealWrite.FindAllString(sqlText, -1) {
		if m != "" {
			return true
		}
	}
	for _, m := range accountUpdate.FindAllStringSubmatch(sqlText, -1) {
		if strings.Contains(strings.ToLower(m[1]), "fx_account") && balanceSet.MatchString(m[2]) {
			return true
		}
	}
	return false
}

var (
	dealWrite     = regexp.MustCompile("(?is)\\b(?:INSERT|REPLACE)\\b(?:\\s+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY|IGNORE))*(?:\\s+INTO)?\\s+(?:`?\\w+`?\\.)?`?fx_deal`?\\b|\\bUPDATE\\b[^;]*?\\bfx_deal\\b[^;]*?\\bSET\\b|\\bDELETE\\b[^;]*?\\bFROM\\b[^;]*?\\bfx_deal\\b")
	accountUpdate = regexp.MustCompile(`(?is)\bUPDATE\b([^;]*?)\bSET\b(.*?)(?:\bWHERE\b|;|$)`)
	balanceSet    = regexp.MustCompile("(?is)(?:^|,)\\s*(?:`?\\w+`?\\.)?`?balance(?:Version)?`?\\s*=")
)

// The detector is a test that can fail: it must see each way of writing the ledger, and nothing
// else.
func TestWritesMoneyDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{"INSERT INTO `fx_deal` (`accountId`) VALUES (?)", true},
		{"insert ignore into fx_deal (a) values (1)", true},
		{"REPLACE INTO `fxdesk`.`fx_deal` VALUES (?)", true},
		{"UPDATE `fx_deal` SET `amount` = 0", true},
		{"DELETE FROM `fx_deal` WHERE `id` = ?", true},
		{"UPDATE `fx_account` SET `balance` = ? WHERE `id` = ?", true},
		{"UPDATE fx_account SET equity = ?, balance = balance + ? WHERE id = ?", true},
		{"UPDATE `fx_account` a JOIN `fx_position` p ON p.`accountId` = a.`id` SET a.`balance` = 0", true},
		{"UPDATE `fx_account` SET `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3) WHERE `id` = ?", false},
		{"UPDATE `fx_account` SET `equity` = `balance` + ? WHERE `id` = ?", false},
		{"UPDATE `fx_account` SET `balanceVersion` = `balanceVersion` + 1 WHERE `id` = ?", true},
		{"UPDATE `fx_account` SET `equity` = ?, `balanceVersion` = 0 WHERE `id` = ?", true},
		{"SELECT `balance` FROM `fx_account` WHERE `id` = ? FOR UPDATE", false},
		{"SELECT SUM(`amount`) FROM `fx_deal` WHERE `accountId` = ?", false},
		{"INSERT INTO `fx_deal_archive` (`id`) VALUES (?)", false},
		{"UPDATE `fx_position` SET `swap` = `swap` + ? WHERE `id` = ?", false},
	} {
		if got := writesMoney(c.sql); got != c.want {
			t.Errorf("writesMoney(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// Nothing but this package writes fx_deal or fx_account.balance (docs/architecture.md, «Money and
// the ledger»: one ledger writer). Every string text of the module's non-test Go sources
// (sqlsource: literals and constants joined by + folded into one text, other operands read as ?) is
// checked, fragments of statements built at runtime included.
func TestOnlyTheLedgerWritesMoney(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	for _, s := range texts {
		if path.Dir(s.File) == "internal/ledger" {
			continue
		}
		if writesMoney(s.Text) {
			t.Errorf("%s writes the ledger outside internal/ledger (post through ledger.Post): %s", s.Where(), s.Text)
		}
	}
}
