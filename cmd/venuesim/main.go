// Command venuesim runs the bundled venue simulator alone, for development: the OANDA v20 subset
// the desk speaks at http://ADDR/v3/… and its control API at http://CONTROL-ADDR/control/…, until
// interrupted. Prices come from a feed simulator's control API (-feed-control), or else are the
// feed simulator's fixed starting quotes.
//
//	go run ./cmd/feedsim -addr 127.0.0.1:8090 -always-open &
//	go run ./cmd/venuesim -addr 127.0.0.1:8091 -control-addr 127.0.0.1:8092 -feed-control http://127.0.0.1:8090
package main

import (
	"github.com/shopspring/decimal"

	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"fxdesk/internal/logging"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/sim/venuesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "venuesim:", err)
		os.Exit(1)
	}
}

// run parses args, starts the simulator, prints its URLs on stdout and serves until ctx ends.
// The token may come from VENUESIM_TOKEN instead of -token, so it stays off the command line.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("venuesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "trading API listen address")
	controlAddr := fs.String("control-addr", "127.0.0.1:0", "control API listen address (answers loopback callers only)")
	account := fs.String("account", venuesim.DefaultAccountID, "the venue account id")
	token := fs.String("token", getenv("VENUESIM_TOKEN"), "accept only this bearer token (default $VENUESIM_TOKEN; empty: any)")
	latency := fs.Duration("latency", venuesim.DefaultLatency, "execution latency of orders and closes (0 for none)")
	feedControl := fs.String("feed-control", "", "the feed simulator's base URL for prices (e.g. http://127.0.0.1:8090)")
	balance := fs.String("balance", "1000000", "the venue account's opening deposit")
	verbose := fs.Bool("v", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	deposit, err := decimal.NewFromString(*balance)
	if err != nil || !deposit.IsPositive() {
		return fmt.Errorf("-balance %q must be a positive amount", *balance)
	}
	if *latency < 0 {
		return fmt.Errorf("-latency %v must not be negative", *latency)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := logging.New(stderr, "text", level, *token).With(slog.String("component", "VENUESIM"))

	var prices venuesim.PriceSource
	if *feedControl != "" {
		var err error
		if prices, err = venuesim.FeedControlPrices(*feedControl); err != nil {
			return err
		}
	} else {
		// Never served: its starting quotes are the prices, and they do not move.
		prices = venuesim.FeedPrices(feedsim.New(feedsim.Config{AlwaysOpen: true, DisableWalk: true}, log))
	}
	sim, err := venuesim.New(venuesim.Config{AccountID: *account, Token: *token, Latency: *latency, Prices: prices, Balance: deposit}, log)
	if err != nil {
		return err
	}
	if _, err := sim.Listen(*addr); err != nil {
		return err
	}
	if _, err := sim.ListenControl(*controlAddr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, venuesim.ListeningLine(sim.URL(), sim.ControlURL(), sim.AccountID()))
	return sim.Run(ctx)
}
