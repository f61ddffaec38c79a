// Command fxdesk-cron is the desk's scheduler process. It never contends for the engine lease:
// it is refused by construction, before any store is consulted, because orders arrive at the web
// process and the desk has to stay where the orders arrive.
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
		fmt.Fprintln(os.Stderr, "fxdesk-cron:", err)
		os.Exit(1)
	}
}
