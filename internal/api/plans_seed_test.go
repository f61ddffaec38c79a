package api

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/yeargen"
)

// seedForPlans stands in for yeargen.Fill until the generator lands (TEMPORARY: deleted then):
// enough rows, shaped like a broker's, for the optimiser to plan as it would on a year.
func seedForPlans(ctx context.Context, db *sql.DB) (yeargen.Result, error) {
	ctx = audit.WithActor(ctx, audit.Actor{Via: "test"})
	digits := "(SELECT 0 AS i UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	nums := "(SELECT a.i + 10*b.i + 100*c.i + 1000*d.i + 10000*e.i AS n FROM " + digits + " a CROSS JOIN " + digits + " b CROSS JOIN " + digits + " c CROSS JOIN " + digits + " d CROSS JOIN " + digits + " e)"
	stmts := []string{
		"INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) SELECT n + 1, 1000 + n, 'USD', 100, 10000 FROM " + nums + " x WHERE n < 400",
		// the big user (1000) holds accounts 1 and 401; the small user is 1001 (account 2)
		"INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES (401, 1000, 'EUR', 100, 10000)",
		"INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`, `createdAt`) " +
			"SELECT CASE WHEN n % 4 = 0 THEN 1 WHEN n % 4 = 1 THEN 401 ELSE 2 + n % 399 END, 'DEPOSIT', 1, 1, 'USD', CONCAT('seed-', n), NOW(3) - INTERVAL n MINUTE FROM " + nums + " x WHERE n < 60000",
		"INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `requestNonce`, `createdAt`) " +
			"SELECT CASE WHEN n % 5 = 0 THEN 1 ELSE 2 + n % 399 END, 'EURUSD', 'BUY', 'MARKET', 1, CASE WHEN n % 50 = 0 THEN 'PENDING' WHEN n % 7 = 0 THEN 'CANCELLED' ELSE 'FILLED' END, CONCAT('n', n), NOW(3) - INTERVAL n MINUTE FROM " + nums + " x WHERE n < 30000",
		"INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`, `openedAt`, `closedAt`, `closePrice`) " +
			"SELECT o.`accountId`, o.`id`, 'EURUSD', 'BUY', 1, 1, 1.1, IF(o.`id` % 30 = 0, 'OPEN', 'CLOSED'), o.`createdAt`, IF(o.`id` % 30 = 0, NULL, o.`createdAt` + INTERVAL 1 MINUTE), IF(o.`id` % 30 = 0, NULL, 1.2) FROM `fx_order` o WHERE o.`status` = 'FILLED'",
		"INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) SELECT n + 1, 2 + n % 399, 1001 + n % 399, 'deal.posted', '{}', 1, NOW(3) - INTERVAL n SECOND FROM " + nums + " x WHERE n < 60000",
		"INSERT INTO `fx_audit` (`actorTokenId`, `actorUserId`, `actorVia`, `action`, `entityType`, `entityId`, `at`) SELECT 1, 7, 'api', 'x', 'account', n, NOW(3) - INTERVAL n MINUTE FROM " + nums + " x WHERE n < 5000",
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return yeargen.Result{}, fmt.Errorf("seed: %w: %s", err, s[:min(len(s), 200)])
		}
	}
	var r yeargen.Result
	r.BigUser, r.SmallUser, r.BigAccount, r.SmallAccount = 1000, 1001, 1, 2
	var err error
	if r.BigToken, err = auth.Create(ctx, db, r.BigUser, false, "big"); err != nil {
		return r, err
	}
	if r.SmallToken, err = auth.Create(ctx, db, r.SmallUser, false, "small"); err != nil {
		return r, err
	}
	if r.DealerToken, _, err = auth.Issue(ctx, db, auth.Grant{UserID: 7, Role: auth.RoleDealer, Label: "dealer"}); err != nil {
		return r, err
	}
	r.End = time.Now().UTC()
	_ = strings.Repeat
	return r, nil
}
