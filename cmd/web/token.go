package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"fxdesk/internal/auth"
	"fxdesk/internal/config"
	"fxdesk/internal/store"
)

// tokenCommand runs `fxdesk-web token create --user ID [--admin]`: it issues a bearer token for
// the platform user ID and prints it alone on the last line of stdout (scripts take that line).
func tokenCommand(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("usage: fxdesk-web token create --user ID [--admin]")
	}
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	user := fs.Int64("user", 0, "the platform user id the token acts for (required)")
	admin := fs.Bool("admin", false, "grant the admin role (the /api/admin routes)")
	label := fs.String("label", "", "a note stored beside the token, e.g. who it was issued to")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *user <= 0 || fs.NArg() > 0 {
		return fmt.Errorf("usage: fxdesk-web token create --user ID [--admin] (ID a positive whole number)")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	db, err := store.OpenMigrated(ctx, cfg.MySQLDSN, log)
	if err != nil {
		return err
	}
	defer db.Close()
	token, err := auth.Create(ctx, db, *user, *admin, *label)
	if err != nil {
		return err
	}
	role := "trader"
	if *admin {
		role = "admin"
	}
	fmt.Fprintf(stdout, "bearer token for user %d (%s); it is shown once and stored only as a hash:\n", *user, role)
	fmt.Fprintln(stdout, token)
	return nil
}
