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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fxdesk-web:", err)
		os.Exit(1)
	}
}
