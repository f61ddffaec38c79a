// Command feedsim runs the bundled feed simulator alone, for development: a provider websocket at
// ws://ADDR/forex and its control API at http://ADDR/control/…, until interrupted.
//
//	go run ./cmd/feedsim -addr 127.0.0.1:8090 -always-open
//
// Two of them with the same -seed quote the same market, as a desk's primary and backup:
//
//	go run ./cmd/feedsim -addr 127.0.0.1:8090 -seed 7 & go run ./cmd/feedsim -addr 127.0.0.1:8091 -seed 7
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lmittmann/tint"

	"fxdesk/internal/logging"
	"fxdesk/internal/sim/feedsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "feedsim:", err)
		os.Exit(1)
	}
}

// run parses args, starts the simulator, prints its URL on stdout and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("feedsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address (the control API answers loopback callers only)")
	alwaysOpen := fs.Bool("always-open", false, "ignore the trading-session calendars (quote on weekends)")
	walk := fs.Duration("walk", 300*time.Millisecond, "mean interval between two quotes of one symbol")
	seed := fs.Uint64("seed", 0, "market seed: simulators started with the same -seed and -walk quote the same prices (0 = an independent random walk)")
	key := fs.String("key", "", "accept only this provider key (default: any non-empty key)")
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
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(logging.Redact(tint.NewTextHandler(stderr, &tint.Options{Level: level, TimeFormat: time.TimeOnly}), *key))

	sim := feedsim.New(feedsim.Config{AlwaysOpen: *alwaysOpen, WalkInterval: *walk, MarketSeed: *seed, Key: *key}, log)
	if _, err := sim.Listen(*addr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, sim.URL())
	return sim.Run(ctx)
}
