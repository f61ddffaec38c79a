package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
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
// cannot be shown again), and prints how to call the desk with them.
func seedDemo(ctx context.Context, db *sql.DB, svc *trading.Service, stdout io.Writer, base string) error {
	var accountID int64
	err := db.QueryRowContext(ctx, "SELECT `id` FROM `fx_account` WHERE `userId` = ? ORDER BY `id` LIMIT 1", demoTraderUser).Scan(&accountID)
	if errors.Is(err, sql.ErrNoRows) {
		a, err := svc.CreateAccount(ctx, demoTraderUser, "USD", 100)
		if err != nil {
			return fmt.Errorf("demo account: %w", err)
		}
		accountID = a.ID
	} else if err != nil {
		return fmt.Errorf("demo account: %w", err)
	}
	if _, _, err := svc.Deposit(ctx, accountID, decimal.NewFromInt(10000), "demo-initial"); err != nil {
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
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" -d '{\"accountId\":%d,\"symbol\":\"EURUSD\",\"side\":\"BUY\",\"type\":\"MARKET\",\"volume\":\"0.10\",\"requestNonce\":\"demo-1\"}' %s/api/fx/orders\n", accountID, base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/positions\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" -X POST %s/api/fx/positions/ID/close\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $TRADER\" %s/api/fx/deals\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" %s/api/admin/fx/desk\n", base)
	fmt.Fprintf(stdout, "  status page, in a browser: %s/admin/status?token=$ADMIN\n", base)
	fmt.Fprintf(stdout, "  curl -H \"Authorization: Bearer $ADMIN\" -d '{\"amount\":\"500.00\"}' %s/api/admin/fx/accounts/%d/deposit\n", base, accountID)
	return nil
}

// baseURL turns the listener's address into a URL a person can paste.
func baseURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
