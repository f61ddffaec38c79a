// Command fxdesk-web is the desk's web process: the HTTP API, and — in the one process that holds
// the engine lease — the price stream, the risk engine and the venue jobs.
//
//	fxdesk-web                               run the desk
//	fxdesk-web migrate                       apply migrations and exit
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// gcPercent is the Go collector's GOGC when the environment sets none: a heap may grow to five
// times what is live before a collection, so that a collection — which on one Go thread holds a
// burst of closes for several milliseconds — comes a quarter as often (docs/operations.md,
// «Sizing a small machine shared with MariaDB»).
const gcPercent = 400

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fxdesk-web:", err)
		os.Exit(1)
	}
}
