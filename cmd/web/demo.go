package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// The demo's platform users: an admin and one trader.
const (
	demoAdminUser  = 1
	demoTraderUser = 1001
	demoLabel      = "demo"
)

// seedDemo (FXDESK_DEMO=on) gives the desk a trader with a funded USD account and an admin, each
// with a fresh token (the previous demo tokens are revoked: only hashes are stored, so old ones
// cannot be shown again), and prints how to call the desk with them. With the in-process venue
// simulator (venueControl, its control URL) the trader also gets an A-book account, in the
// EXTERNAL group "abook", whose orders go to the venue.
func seedDemo(ctx context.Context, db *sql.DB, svc *trading.Service, groups *catalog.Admin, stdout io.Writer, base, venueControl string, feedControls map[string]string) error {
	// The demo's admin writes (deposits, the A-book group, the move, the tokens) are audited as
	// the demo's.
	ctx = audit.WithActor(ctx, audit.Actor{Via: "demo"})
	var accountID int64
	err := db.QueryRowContext(ctx, "SELECT `id` FROM `fx_account` WHERE `userId` = ? ORDER BY `id` LIMIT 1", demoTraderUser).Scan(&accountID)
	if errors.Is(err, sql.ErrNoRows) {
		a, err := svc.Accounts().Open(ctx, demoTraderUser, "USD", 100)
		if err != nil {
			return fmt.Errorf("demo account: %w", err)
		}
		accountID = a.ID
	} else if err != nil {
		return fmt.Errorf("demo account: %w", err)
	}
	if _, _, err := svc.Accounts().Deposit(ctx, accountID, decimal.NewFromInt(10000), "demo-initial"); err != nil {
		return fmt.Errorf("demo deposit: %w", err)
	}
	if err := auth.RevokeLabel(ctx, db, demoLabel); err != nil {
		return err
	}
	trader, err := auth.Create(ctx, db, demoTraderUser, false, demoLabel)
	if err != nil {
		return err
	}
	admin, err := auth.Create(ctx, db, demoAdminUser, true, demoLabel)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ndemo: trader (user %d) owns account %d with 10000.00 USD; admin is user %d\n", demoTraderUser, accountID, demoAdminUser)
	fmt.Fprintf(stdout, "  export TRADER=%s\n  export ADMIN=%s\n", trader, admin)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/quotes?symbols=EURUSD,USDJPY\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/accounts/%d\n", base, accountID)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" --json '{\"accountId\":%d,\"symbol\":\"EURUSD\",\"side\":\"BUY\",\"type\":\"MARKET\",\"volume\":\"0.10\",\"requestNonce\":\"demo-1\"}' %s/api/fx/orders\n", accountID, base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/positions\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" -X POST %s/api/fx/positions/ID/close\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/deals\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" %s/api/admin/fx/desk\n", base)
	fmt.Fprintf(stdout, "  status page, in a browser: %s/admin/login (sign in with $ADMIN)\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" --json '{\"amount\":\"500.00\"}' %s/api/admin/fx/accounts/%d/deposit\n", base, accountID)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" %s/api/admin/fx/price-sources\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" -X PUT --json '{\"pin\":\"backup\"}' %s/api/admin/fx/price-sources/symbols/EURUSD\n", base)
	for _, name := range slices.Sorted(maps.Keys(feedControls)) {
		c := feedControls[name]
		fmt.Fprintf(stdout, "  price source %s is a feed simulator: curl %s/state · one 300-pip tick: curl --json '{\"symbol\":\"EURUSD\",\"pips\":300,\"ms\":50}' %s/spike · silent: curl --json '{\"symbol\":\"*\",\"seconds\":30}' %s/silence · also /shift, /offset, /disconnect\n", name, c, c, c)
	}
	if venueControl == "" {
		return nil
	}
	abook, err := seedABook(ctx, db, svc, groups)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\ndemo A-book: account %d is in the EXTERNAL group %q: its orders fill at the venue simulator first\n", abook, demoABookGroup)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" --json '{\"accountId\":%d,\"symbol\":\"EURUSD\",\"side\":\"BUY\",\"type\":\"MARKET\",\"volume\":\"0.10\",\"requestNonce\":\"demo-a1\"}' %s/api/fx/orders\n", abook, base)
	fmt.Fprintf(stdout, "  curl %s/control/state   (the venue's trades; faults: POST %s/control/fault)\n", venueControl, venueControl)
	return nil
}

const demoABookGroup = "abook"

// seedABook makes the demo's EXTERNAL account group and the trader's funded account in it.
func seedABook(ctx context.Context, db *sql.DB, svc *trading.Service, admin *catalog.Admin) (int64, error) {
	// The group and the move are admin changes: the audit log records them as the demo's.
	ctx = audit.WithActor(ctx, audit.Actor{Via: "demo"})
	if err := admin.EnsureAccountGroup(ctx, demoABookGroup, fx.External); err != nil && fx.ErrorCode(err) != fx.ECONFLICT {
		return 0, fmt.Errorf("demo A-book group: %w", err)
	}
	var id int64
	err := db.QueryRowContext(ctx, "SELECT `id` FROM `fx_account` WHERE `userId` = ? AND `accountGroup` = ? ORDER BY `id` LIMIT 1", demoTraderUser, demoABookGroup).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		a, err := svc.Accounts().Open(ctx, demoTraderUser, "USD", 100)
		if err != nil {
			return 0, fmt.Errorf("demo A-book account: %w", err)
		}
		if err := admin.MoveAccount(ctx, a.ID, demoABookGroup); err != nil {
			return 0, fmt.Errorf("demo A-book account: %w", err)
		}
		id = a.ID
	} else if err != nil {
		return 0, fmt.Errorf("demo A-book account: %w", err)
	}
	if _, _, err := svc.Accounts().Deposit(ctx, id, decimal.NewFromInt(10000), "demo-abook-initial"); err != nil {
		return 0, fmt.Errorf("demo A-book deposit: %w", err)
	}
	return id, nil
}

// baseURL turns the listener's address into a URL a person can paste.
func baseURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
