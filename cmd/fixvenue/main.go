// Command fixvenue runs the bundled FIX venue alone: a FIX 4.4 acceptor at ADDR that fills the
// desk's market orders at a feed simulator's prices, and its control API at
// http://CONTROL-ADDR/control/…, until interrupted. Prices come from a feed simulator's control
// API (-feed-control), or else are the feed simulator's fixed starting quotes.
//
//	go run ./cmd/feedsim -addr 127.0.0.1:8090 -always-open &
//	go run ./cmd/fixvenue -addr 127.0.0.1:9878 -control-addr 127.0.0.1:9879 -feed-control http://127.0.0.1:8090
//
// With -username and -password it requires those credentials on the desk's Logon (the session
// file's Username and Password; docs/fix.md). -executions N fills every order in N executions;
// -own-clordids numeric or none names the venue's own orders as many liquidity providers do;
// -part-step (default 1,000 units) is the increment a partial IOC fill comes in.
//
// Market data (MarketDataRequest, snapshots and incrementals of the same prices) is served on a
// second session on the same port, FXDESK-MD -> FXVENUE-MD as the desk names it (-md-target,
// -md-sender): a desk price source fix://ADDR?sender=FXDESK-MD&target=FXVENUE-MD (docs/fix.md).
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

	"github.com/shopspring/decimal"

	"fxdesk/internal/logging"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/sim/venuesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fixvenue:", err)
		os.Exit(1)
	}
}

// run parses args, starts the venue, prints where it listens on stdout and serves until ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fixvenue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "FIX listen address (the desk's SocketConnectHost/Port)")
	controlAddr := fs.String("control-addr", "127.0.0.1:0", "control API listen address (answers loopback callers only)")
	venueID := fs.String("sender", fixvenue.DefaultVenueCompID, "the venue's SenderCompID (the desk's TargetCompID)")
	deskID := fs.String("target", fixvenue.DefaultDeskCompID, "the venue's TargetCompID (the desk's SenderCompID)")
	latency := fs.Duration("latency", fixvenue.DefaultLatency, "execution latency of orders (0 for none)")
	feedControl := fs.String("feed-control", "", "the feed simulator's base URL for prices (e.g. http://127.0.0.1:8090)")
	username := fs.String("username", "", "the Username (553) the desk's Logon must carry (with -password)")
	password := fs.String("password", "", "the Password (554) the desk's Logon must carry; a Logon without it or with another is refused with a Logout saying why (empty: no credentials required)")
	executions := fs.Int("executions", 0, "fill every order that meets no fault in this many executions, each reported (0 or 1: one)")
	mdVenueID := fs.String("md-sender", fixvenue.DefaultMDVenueCompID, "the venue's SenderCompID on the market-data session (the desk's TargetCompID there)")
	mdDeskID := fs.String("md-target", fixvenue.DefaultMDDeskCompID, "the venue's TargetCompID on the market-data session (the desk's SenderCompID there)")
	mdInterval := fs.Duration("md-interval", fixvenue.DefaultMarketDataInterval, "how often the market-data session reads the prices of subscribed symbols for changes")
	ownClOrdIDs := fs.String("own-clordids", fixvenue.OwnPrefixed, "how the venue names the orders it makes itself (venue-side closes): prefixed (VENUE-n), numeric (n) or none (no ClOrdID)")
	partStep := fs.String("part-step", "1000", "the increment (units) a partial fill of an IOC order comes in: a part the desk's lots can hold (0: the fault's units as given)")
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
	if *latency < 0 {
		return fmt.Errorf("-latency %v must not be negative", *latency)
	}
	step, err := decimal.NewFromString(*partStep)
	if err != nil || step.IsNegative() {
		return fmt.Errorf("-part-step %q must be a non-negative number of units", *partStep)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := logging.New(stderr, "text", level).With(slog.String("component", "FIXVENUE"))
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
	v, err := fixvenue.New(fixvenue.Config{VenueCompID: *venueID, DeskCompID: *deskID, Latency: *latency, Prices: prices,
		Username: *username, Password: *password, Executions: *executions, OwnClOrdIDs: *ownClOrdIDs,
		MDVenueCompID: *mdVenueID, MDDeskCompID: *mdDeskID, MarketDataInterval: *mdInterval, PartStep: step}, log)
	if err != nil {
		return err
	}
	at, err := v.Listen(*addr)
	if err != nil {
		return err
	}
	control, err := v.ListenControl(*controlAddr)
	if err != nil {
		v.Stop()
		return err
	}
	fmt.Fprintln(stdout, fixvenue.ListeningLine(at, control, *deskID, *venueID)+fixvenue.MarketDataListening(*mdDeskID, *mdVenueID))
	return v.Run(ctx)
}
