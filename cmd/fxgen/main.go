// Command fxgen fills a database with a generated broker's history (internal/yeargen) and prints
// what it wrote as JSON: the named traders, their accounts and API tokens, the dealer's token
// and the row counts (docs/operations.md, «A year of data»).
//
//	go run ./cmd/fxgen -dsn 'root@tcp(127.0.0.1:3306)/fxdesk_year' -size year
//
// The database is created and migrated if missing, and must hold no accounts.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"fxdesk/internal/logging"
	"fxdesk/internal/store"
	"fxdesk/internal/yeargen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fxgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fxgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "root@tcp(127.0.0.1:3306)/fxdesk_year", "database to fill (created and migrated if missing; must hold no accounts)")
	sizeName := fs.String("size", "small", "year, month or small (internal/yeargen)")
	seed := fs.Int64("seed", 1, "the same seed and size write the same history")
	endText := fs.String("end", "", "the history's end, RFC 3339 (default: now)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	size, err := yeargen.SizeNamed(*sizeName)
	if err != nil {
		return err
	}
	end := time.Now().UTC().Truncate(time.Millisecond)
	if *endText != "" {
		if end, err = time.Parse(time.RFC3339, *endText); err != nil {
			return fmt.Errorf("-end: %w", err)
		}
	}
	log := logging.New(stderr, "text", 0)
	db, err := store.OpenMigrated(ctx, *dsn, log)
	if err != nil {
		return err
	}
	db.Close()
	loader, err := yeargen.OpenLoader(*dsn)
	if err != nil {
		return err
	}
	defer loader.Close()
	res, err := yeargen.Fill(ctx, loader, size, *seed, end, log)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
