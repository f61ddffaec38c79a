package store

import (
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	tidb "github.com/pingcap/tidb/pkg/parser"
	tidbast "github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"

	"fxdesk/internal/testkit/sqlsource"
	"fxdesk/migrations"
)

// The desk's SQL must run on MySQL 8.0+ as well as MariaDB 10.6+ (docs/architecture.md, «Beyond one
// machine»; docs/mysql.md). These tests parse every statement the desk sends with a MySQL grammar —
// the TiDB parser, a test-only dependency — and refuse the MariaDB extensions that grammar happens
// to accept too (notPortable). MariaDB is the server the suite runs on, so MariaDB's acceptance is
// tested by every other test; MySQL's grammar is what these add.
//
// What is checked: every statement of every migration, and every SQL text in the non-test Go
// sources, found by walking the syntax trees (sourceSQL). What is not: the statements the walker
// cannot fold because they are built at runtime (built, below, lists them with a representative
// text), and SQL the desk does not send itself (tests, benches, the e2e harness).

// built are the statements assembled at runtime with a strings.Builder, which the walker sees
// only in fragments: one entry per function that builds SQL (sourceSQL finds them; an entry
// must exist for each), each statement given in a representative shape — two rows, two WHENs.
// When one of them changes shape, change it here too.
var built = map[string][]string{
	"internal/book.listPageSQL": {
		"SELECT d.`id`, d.`accountId` FROM `fx_deal` d FORCE INDEX (`idx_fx_deal_account`) WHERE d.`accountId` = ? ORDER BY d.`id` DESC LIMIT ?",
		"(SELECT p.`id`, (SELECT c.`currency` FROM `fx_account` c WHERE c.`id` = p.`accountId`) FROM `fx_position` p FORCE INDEX (`idx_fx_position_account_list`) " +
			"WHERE p.`accountId` = ? AND p.`status` = ? AND p.`id` < ? ORDER BY p.`id` DESC LIMIT ?) UNION ALL " +
			"(SELECT p.`id`, (SELECT c.`currency` FROM `fx_account` c WHERE c.`id` = p.`accountId`) FROM `fx_position` p FORCE INDEX (`idx_fx_position_account_list`) " +
			"WHERE p.`accountId` = ? AND p.`status` = ? AND p.`id` < ? ORDER BY p.`id` DESC LIMIT ?) ORDER BY `id` DESC LIMIT ?",
	},
	"internal/eod.captureDay": {
		"INSERT INTO `fx_eod_price` (`tradingDay`, `symbol`, `bid`, `ask`, `quotedAt`, `capturedBy`) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE `tradingDay` = `tradingDay`",
	},
	"internal/eod.freezeBatch": {
		"INSERT INTO `fx_eod_account` (`tradingDay`, `accountId`, `currency`, `balance`, `equity`, `margin`, `freeMargin`, `floatingPnl`, `openPositions`, `pendingOrders`, `throughDealId`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `accountId` = `accountId`",
	},
	"internal/eod.openPositions": {
		"SELECT p.`id`, p.`symbol`, p.`side`, p.`v`, p.`openPrice`, p.`openedAt` FROM (SELECT ps.`id`, ps.`accountId`, ps.`symbol`, ps.`side`, " +
			"ps.`venueTradeId` IS NOT NULL AS `external`, ps.`openPrice`, ps.`openedAt`, ps.`volume` + COALESCE((SELECT SUM(d.`volume`) FROM `fx_deal` d " +
			"WHERE d.`positionId` = ps.`id` AND d.`type` = 'PROFIT' AND d.`createdAt` >= ? LIMIT 1), 0) AS `v` FROM `fx_position` ps WHERE ps.`openedAt` < ? " +
			"AND (ps.`status` = 'OPEN' OR (ps.`status` = 'CLOSED' AND ps.`closedAt` >= ?)) AND ps.`accountId` IN (?)) p WHERE p.`v` > 0 ORDER BY p.`id`",
	},
	"internal/eod.freezeDesk": {
		"INSERT INTO `fx_eod_symbol` (`tradingDay`, `symbol`, `currency`, `bbookNet`, `abookNet`, `hedgeUnits`, `realised`, `markup`, `commission`, `swaps`, `nbp`, `hedgeBook`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `symbol` = `symbol`",
	},
	"internal/venue/fix.insertOrdersSQL": {
		"INSERT INTO `fx_fix_order` (`clOrdId`, `tradeId`, `symbol`, `side`, `qty`, `status`) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)",
	},
	"internal/venue/fix.insertMessagesSQL": {
		"INSERT INTO `fx_fix_messages` (`beginstring`, `sendercompid`, `sendersubid`, `senderlocid`, `targetcompid`, `targetsubid`, `targetlocid`, `session_qualifier`, `msgseqnum`, `message`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `message` = VALUES(`message`)",
	},
	"internal/ledger.Post": {
		"INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, " +
			"`symbol`, `side`, `volume`, `price`, `markup`, `idempotencyKey`, `comment`, `venueTransactionId`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, @fx_order_id, @fx_position_id, ?, ?, ?, ?, ?, CONCAT(?, @fx_order_id), ?, ?)",
	},
	"internal/events.Flush": {
		"INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES (LAST_INSERT_ID() - ?, ?, ?, ?, ?, ?, NOW(3)), (LAST_INSERT_ID() - ?, ?, ?, ?, JSON_SET(?, '$.id', @fx_p1, '$.orderId', @fx_o0), ?, NOW(3))",
		"INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES (LAST_INSERT_ID() - ?, ?, ?, ?, ?, ?, NOW(3))",
	},
	"internal/trading.storeTrailChunk": {
		"UPDATE `fx_position` p JOIN (SELECT ? AS `id`, ? AS `lvl`, ? AS `d` UNION ALL SELECT ? AS `id`, ? AS `lvl`, ? AS `d`) v ON p.`id` = v.`id` " +
			"SET p.`trailLevel` = CASE WHEN p.`trailLevel` IS NULL THEN v.`lvl` WHEN p.`side` = 'BUY' THEN GREATEST(p.`trailLevel`, v.`lvl`) ELSE LEAST(p.`trailLevel`, v.`lvl`) END " +
			"WHERE p.`trailDistance` IS NOT NULL AND p.`status` = 'OPEN' AND p.`trailDistance` = v.`d`",
	},
	"internal/trading.Flush": {
		"INSERT INTO `fx_account_profile` (`accountId`, `trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute`, `lastTradeAt`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `trades` = `trades` + VALUES(`trades`), `wins` = `wins` + VALUES(`wins`), " +
			"`grossProfit` = `grossProfit` + VALUES(`grossProfit`), `grossLoss` = `grossLoss` + VALUES(`grossLoss`), " +
			"`holdMillis` = `holdMillis` + VALUES(`holdMillis`), `underMinute` = `underMinute` + VALUES(`underMinute`), `lastTradeAt` = VALUES(`lastTradeAt`)",
	},
	"internal/book.closeUpdate": {
		"UPDATE `fx_position` FORCE INDEX (PRIMARY) SET `volume` = CASE WHEN `id` IN (?, ?) THEN 0 WHEN `id` = ? THEN ? ELSE `volume` END, " +
			"`realizedProfit` = CASE WHEN `id` = ? THEN ? WHEN `id` = ? THEN ? WHEN `id` = ? THEN ? ELSE `realizedProfit` END, " +
			"`closePrice` = CASE WHEN `id` IN (?, ?) THEN ? ELSE `closePrice` END, `status` = CASE WHEN `id` IN (?, ?) THEN 'CLOSED' ELSE `status` END, " +
			"`closeReason` = CASE WHEN `id` = ? THEN ? WHEN `id` = ? THEN ? ELSE `closeReason` END, `closedAt` = CASE WHEN `id` IN (?, ?) THEN NOW(3) ELSE `closedAt` END " +
			"WHERE `id` IN (?, ?, ?)",
		"UPDATE `fx_position` FORCE INDEX (PRIMARY) SET `volume` = 0, `realizedProfit` = CASE WHEN `id` = ? THEN ? WHEN `id` = ? THEN ? ELSE `realizedProfit` END, " +
			"`closePrice` = ?, `status` = 'CLOSED', `closeReason` = ?, `closedAt` = NOW(3) WHERE `id` IN (?, ?)",
	},
	"internal/ledger.balanceUpdate": {
		"UPDATE `fx_account` SET `balance` = ?, `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3), " +
			"`balanceVersion` = `balanceVersion` + 1 WHERE `id` = ?",
		"UPDATE `fx_account` SET `balance` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? ELSE `balance` END, " +
			"`equity` = CASE `id` WHEN ? THEN `equity` + ? WHEN ? THEN `equity` + ? ELSE `equity` END, " +
			"`balanceVersion` = `balanceVersion` + 1 WHERE `id` IN (?, ?)",
	},
	"internal/swaps.parkPending": {
		"INSERT INTO `fx_swap_charge` (`positionId`, `rolloverDate`, `accountId`, `symbol`, `side`, `volume`, `days`, " +
			"`amountQuote`, `quoteCurrency`, `accountCurrency`, `missingLegs`) VALUES " +
			"(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE `attempts` = `attempts`",
	},
	"internal/swaps.retryPending": {
		"UPDATE `fx_swap_charge` SET `attempts` = `attempts` + 1, `lastTriedAt` = NOW(3) " +
			"WHERE `status` = 'PENDING' AND (`positionId`, `rolloverDate`) IN ((?, ?), (?, ?))",
	},
	"internal/swaps.accrue": {
		// A pending charge's (no watermark), a batch's, and a batch's whose positions were all swap-free.
		"UPDATE `fx_position` SET `swap` = `swap` + CASE `id` WHEN ? THEN ? WHEN ? THEN ? ELSE 0 END WHERE `id` IN (?, ?)",
		"UPDATE `fx_position` SET `swapThrough` = ?, `swap` = `swap` + CASE `id` WHEN ? THEN ? WHEN ? THEN ? ELSE 0 END " +
			"WHERE `id` IN (?, ?)",
		"UPDATE `fx_position` SET `swapThrough` = ? WHERE `id` IN (?, ?)",
	},
	"internal/swaps.settlePending": {
		"SELECT `positionId`, `rolloverDate` FROM `fx_swap_charge` WHERE `status` = 'PENDING' " +
			"AND (`positionId`, `rolloverDate`) IN ((?, ?), (?, ?)) FOR UPDATE",
		"UPDATE `fx_swap_charge` SET `status` = 'CHARGED', `settledAt` = NOW(3), `lastTriedAt` = NOW(3), `attempts` = `attempts` + 1, " +
			"`amount` = CASE WHEN `positionId` = ? AND `rolloverDate` = ? THEN ? WHEN `positionId` = ? AND `rolloverDate` = ? THEN ? END " +
			"WHERE (`positionId`, `rolloverDate`) IN ((?, ?), (?, ?))",
	},
	"internal/book.StaleCheck": {
		"SELECT 18446744073709551615 + COALESCE((SELECT COUNT(*) FROM `fx_account` a WHERE (a.`id`, a.`balanceVersion`, a.`userId`, a.`accountGroup`, a.`currency`, a.`leverage`, a.`state`) " +
			"IN ((?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)) AND (SELECT g.`executionMode` FROM `fx_account_group` g WHERE g.`name` = a.`accountGroup` LIMIT 1) = 'INTERNAL') <> ? " +
			"OR (SELECT COUNT(*), COALESCE(SUM((e.`accountId`, e.`symbol`, e.`side`, e.`v`, e.`vp`) IN " +
			"((?, ?, ?, CAST(? AS DECIMAL(65,20)), CAST(? AS DECIMAL(65,20))), (?, ?, ?, CAST(? AS DECIMAL(65,20)), CAST(? AS DECIMAL(65,20))))), 0) " +
			"FROM (SELECT p.`accountId`, p.`symbol`, p.`side`, SUM(p.`volume`) AS `v`, SUM(p.`volume` * p.`openPrice`) AS `vp` " +
			"FROM `fx_position` p WHERE p.`accountId` IN (?, ?) AND p.`status` = 'OPEN' GROUP BY p.`accountId`, p.`symbol`, p.`side`) e) <> (?, ?), 1)",
		// An account with no open position, and a fill carrying a request nonce.
		"SELECT 18446744073709551615 + COALESCE((SELECT COUNT(*) FROM `fx_account` a WHERE (a.`id`, a.`balanceVersion`, a.`userId`, a.`accountGroup`, a.`currency`, a.`leverage`, a.`state`) " +
			"IN ((?, ?, ?, ?, ?, ?, ?)) AND (SELECT g.`executionMode` FROM `fx_account_group` g WHERE g.`name` = a.`accountGroup` LIMIT 1) = 'INTERNAL') <> ? " +
			"OR EXISTS (SELECT 1 FROM `fx_order` o WHERE (o.`accountId`, o.`requestNonce`) IN ((?, ?))) " +
			"OR (SELECT COUNT(*), 0 FROM (SELECT p.`accountId`, p.`symbol`, p.`side`, SUM(p.`volume`) AS `v`, SUM(p.`volume` * p.`openPrice`) AS `vp` " +
			"FROM `fx_position` p WHERE p.`accountId` IN (?) AND p.`status` = 'OPEN' GROUP BY p.`accountId`, p.`symbol`, p.`side`) e) <> (?, ?), 1)",
	},
	"internal/book.readBackSQL": {
		"SELECT LAST_INSERT_ID(), @@auto_increment_increment, @fx_o1, @fx_p2",
	},
	"internal/book.SetVarSQL": {
		"SET @fx_o1 = LAST_INSERT_ID()",
		"SET @fx_o1 = ?",
	},
	"internal/marks.checkLedger": {
		"INSERT INTO `fx_ledger_checkpoint` (`accountId`, `throughDealId`, `dealsSum`) VALUES (?, ?, ?), (?, ?, ?) " +
			"ON DUPLICATE KEY UPDATE `throughDealId` = VALUES(`throughDealId`), `dealsSum` = VALUES(`dealsSum`)",
	},
	"internal/marks.sumNewDeals": {
		"SELECT d.`accountId`, SUM(d.`amount`) FROM `fx_deal` d WHERE (d.`accountId` = ? AND d.`id` > ? AND d.`id` <= ?) " +
			"OR (d.`accountId` = ? AND d.`id` > ? AND d.`id` <= ?) GROUP BY d.`accountId`",
	},
	"internal/marks.markBatch": {
		"UPDATE `fx_account` SET `equity` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? END, " +
			"`usedMargin` = CASE `id` WHEN ? THEN ? WHEN ? THEN ? END, `markedAt` = NOW(3) WHERE `id` IN (?, ?)",
	},
}

// sqlStart recognises a Go string that is SQL by its leading keyword.
var sqlStart = regexp.MustCompile(`^(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|ALTER|DROP|TRUNCATE|START TRANSACTION|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET|DO|LOCK|UNLOCK|WITH|CALL|SHOW|EXPLAIN|ANALYZE|KILL|LOAD DATA)\b`)

// fmtVerb is a fmt verb in a Sprintf'd statement; it stands for a value or a list of values.
var fmtVerb = regexp.MustCompile(`%(\[\d+\])?[-+# 0]*\d*(\.\d+)?[sdvqxf]`)

type sqlText struct {
	where string // file:line, or migration and statement number
	text  string
}

func TestSQLIsPortable(t *testing.T) {
	t.Parallel()
	var all []sqlText
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		body, err := fs.ReadFile(migrations.FS, file)
		if err != nil {
			t.Fatal(err)
		}
		for i, stmt := range statements(string(body)) {
			all = append(all, sqlText{fmt.Sprintf("migrations/%s statement %d", file, i+1), stmt})
		}
	}
	src, sites, err := sourceSQL(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(src) < 50 {
		t.Fatalf("found %d SQL texts in the Go sources; the walker is broken", len(src))
	}
	all = append(all, src...)
	for _, site := range slices.Sorted(maps.Keys(sites)) {
		if len(built[site]) == 0 {
			t.Errorf("%s builds SQL with a strings.Builder: add its statements to built", site)
		}
	}
	for _, site := range slices.Sorted(maps.Keys(built)) {
		if !sites[site] {
			t.Errorf("built lists %s, which builds no SQL any more", site)
		}
		for i, stmt := range built[site] {
			all = append(all, sqlText{fmt.Sprintf("built %s #%d", site, i+1), stmt})
		}
	}
	for _, s := range all {
		if err := portable(s.text); err != nil {
			t.Errorf("%s: %v\n\t%s", s.where, err, s.text)
		}
	}
	t.Logf("%d statements checked, %d of them built at runtime and given in built", len(all), len(sites))
}

// store.IsFenceRefusal takes error 1242 in a batch that carries the fence to be the fence's: that
// holds only while no other statement the desk sends has a scalar subquery that can return more
// than one row. Each scalar subquery outside internal/lease/fence.go must be one row by
// construction: LIMIT 1, or an id = … condition (every desk table's id is its primary key).
func TestOnlyTheFenceCanRaise1242(t *testing.T) {
	t.Parallel()
	src, _, err := sourceSQL(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fences := 0
	for _, s := range src {
		nodes, _, err := tidb.New().Parse(s.text, "", "")
		if err != nil {
			continue // TestSQLIsPortable reports it
		}
		for _, n := range nodes {
			v := &scalarSubqueries{notScalar: map[*tidbast.SubqueryExpr]bool{}}
			n.Accept(v)
			for _, q := range v.scalar {
				switch {
				case oneRow(q):
				case strings.Contains(s.where, "internal/lease/fence.go"):
					fences++
				default:
					t.Errorf("%s: a scalar subquery that may return more than one row would pass for the lease fence's refusal (1242); "+
						"give it LIMIT 1 or select by id\n\t%s", s.where, s.text)
				}
			}
		}
	}
	if fences == 0 {
		t.Error("found no scalar subquery in the lease fence; the walker or the fence changed")
	}
}

// scalarSubqueries collects the subqueries of a statement that stand for one value: not a
// derived table, nor the right side of IN, EXISTS, ANY or ALL.
type scalarSubqueries struct {
	notScalar map[*tidbast.SubqueryExpr]bool
	scalar    []*tidbast.SubqueryExpr
}

func (v *scalarSubqueries) Enter(n tidbast.Node) (tidbast.Node, bool) {
	mark := func(e tidbast.Node) {
		if q, ok := e.(*tidbast.SubqueryExpr); ok {
			v.notScalar[q] = true
		}
	}
	switch n := n.(type) {
	case *tidbast.TableSource:
		mark(n.Source)
	case *tidbast.PatternInExpr:
		mark(n.Sel)
	case *tidbast.ExistsSubqueryExpr:
		mark(n.Sel)
	case *tidbast.CompareSubqueryExpr:
		mark(n.R)
	case *tidbast.SubqueryExpr:
		if !v.notScalar[n] {
			v.scalar = append(v.scalar, n)
		}
	}
	return n, false
}

func (v *scalarSubqueries) Leave(n tidbast.Node) (tidbast.Node, bool) { return n, true }

// oneRow reports whether a subquery returns at most one row by its own text.
func oneRow(q *tidbast.SubqueryExpr) bool {
	sel, ok := q.Query.(*tidbast.SelectStmt)
	if !ok {
		return false
	}
	if sel.Limit != nil {
		if c, ok := sel.Limit.Count.(tidbast.ValueExpr); ok && sel.Limit.Offset == nil && fmt.Sprint(c.GetValue()) == "1" {
			return true
		}
	}
	var byID func(e tidbast.ExprNode) bool
	byID = func(e tidbast.ExprNode) bool {
		b, ok := e.(*tidbast.BinaryOperationExpr)
		if !ok {
			return false
		}
		switch b.Op {
		case opcode.LogicAnd:
			return byID(b.L) || byID(b.R)
		case opcode.EQ:
			c, ok := b.L.(*tidbast.ColumnNameExpr)
			return ok && c.Name.Name.L == "id"
		}
		return false
	}
	return sel.Where != nil && byID(sel.Where)
}

// The checker itself refuses MariaDB-only statements, so TestSQLIsPortable can fail.
func TestPortableRefusesMariaDBOnlySQL(t *testing.T) {
	t.Parallel()
	for _, q := range []string{
		"BEGIN NOT ATOMIC DECLARE held INT; SELECT COUNT(*) INTO held FROM `engine_lease`; IF held = 0 THEN SIGNAL SQLSTATE '45000'; END IF; END",
		"INSERT INTO `fx_deal` (`accountId`) VALUES (?) RETURNING `id`",
		"DELETE FROM `fx_deal` WHERE `id` = ? RETURNING `id`",
		"CREATE INDEX IF NOT EXISTS `ix` ON `fx_deal` (`accountId`)",
		"DROP INDEX IF EXISTS `ix` ON `fx_deal`",
		"ALTER TABLE `fx_deal` ADD COLUMN IF NOT EXISTS `note` TEXT",
		"ALTER TABLE `fx_deal` DROP COLUMN IF EXISTS `note`",
		"ALTER TABLE `fx_deal` ADD INDEX IF NOT EXISTS `ix` (`accountId`)",
		"CREATE OR REPLACE TABLE `t` (`a` INT)",
		"CREATE SEQUENCE `s`",
		"SELECT `id` FROM `engine_lease` FOR SHARE", // the other way round: MySQL-only
	} {
		if err := portable(q); err == nil {
			t.Errorf("portable(%q) = nil, want a refusal", q)
		}
	}
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS `t` (`a` INT)",
		"SELECT `id` FROM `engine_lease` WHERE `id` = ? LOCK IN SHARE MODE",
		"INSERT INTO `t` (`a`) VALUES (?) ON DUPLICATE KEY UPDATE `a` = VALUES(`a`)",
	} {
		if err := portable(q); err != nil {
			t.Errorf("portable(%q) = %v, want nil", q, err)
		}
	}
}

// portable reports why text (one or more statements) is not valid on both MySQL 8 and MariaDB.
func portable(text string) error {
	nodes, _, err := tidb.New().Parse(text, "", "")
	if err != nil {
		return fmt.Errorf("not MySQL syntax: %w", err)
	}
	for _, n := range nodes {
		if why := notPortable(n); why != "" {
			return fmt.Errorf("accepted by the MySQL grammar, but %s", why)
		}
	}
	if forShare.MatchString(text) {
		return fmt.Errorf("FOR SHARE is MySQL-only; MariaDB knows LOCK IN SHARE MODE")
	}
	return nil
}

var forShare = regexp.MustCompile(`(?i)\bFOR\s+SHARE\b`)

// notPortable is the denylist on top of the grammar: extensions the TiDB grammar accepts that
// MySQL 8 refuses (its own or MariaDB's), named so a reader sees what is refused and why.
func notPortable(n tidbast.StmtNode) string {
	switch s := n.(type) {
	case *tidbast.CreateIndexStmt:
		if s.IfNotExists {
			return "CREATE INDEX IF NOT EXISTS is MariaDB-only"
		}
	case *tidbast.DropIndexStmt:
		if s.IfExists {
			return "DROP INDEX IF EXISTS is MariaDB-only"
		}
	case *tidbast.AlterTableStmt:
		for _, spec := range s.Specs {
			if spec.IfExists || spec.IfNotExists || spec.Constraint != nil && spec.Constraint.IfNotExists {
				return "IF [NOT] EXISTS on an ALTER TABLE column or index is MariaDB-only"
			}
		}
	case *tidbast.CreateSequenceStmt, *tidbast.DropSequenceStmt, *tidbast.AlterSequenceStmt:
		return "sequences are not MySQL"
	case *tidbast.CreateViewStmt:
		// CREATE OR REPLACE VIEW is MySQL too; CREATE OR REPLACE TABLE is refused by the grammar.
	}
	return ""
}

// sourceSQL returns every SQL text in the non-test Go files under root, and the functions that
// build SQL with a strings.Builder (by "package directory.function").
//
// The texts are sqlsource's (string literals and constants joined by + folded into one text,
// other operands ?), with fmt verbs made ?; a text is SQL when it starts with a statement
// keyword. In a function that declares a strings.Builder the texts are fragments: they are
// returned only when they parse, and the function is reported as a builder site instead.
func sourceSQL(root string) (texts []sqlText, builderSites map[string]bool, err error) {
	all, _, err := sqlsource.Texts(root)
	if err != nil {
		return nil, nil, err
	}
	builderSites = map[string]bool{}
	for _, s := range all {
		text := strings.TrimSpace(s.Text)
		if !sqlStart.MatchString(text) {
			continue
		}
		t := sqlText{s.Where(), fmtVerb.ReplaceAllString(text, "?")}
		if s.Builder != "" {
			builderSites[s.Builder] = true
			if portable(t.text) != nil {
				continue
			}
		}
		texts = append(texts, t)
	}
	return texts, builderSites, nil
}
