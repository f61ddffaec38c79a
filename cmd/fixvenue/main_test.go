package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"

	"fxdesk/internal/sim/fixvenue"
)

// The command prints where it listens, both listeners answer, and it stops with its context as
// a signal would.
func TestCommandPrintsWhereItListensAndStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-latency", "0", "-sender", "LP1", "-target", "DESK1"}, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, control, sender, target, err := fixvenue.ParseListening(line)
	if err != nil || sender != "DESK1" || target != "LP1" {
		t.Fatalf("%q: %v", line, err)
	}
	if mdSender, mdTarget, err := fixvenue.ParseListeningMD(line); err != nil || mdSender != fixvenue.DefaultMDDeskCompID || mdTarget != fixvenue.DefaultMDVenueCompID {
		t.Fatalf("%q: market-data session %s -> %s (%v), want the defaults", line, mdSender, mdTarget, err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("FIX port: %v", err)
	}
	c.Close()
	resp, err := http.Get(control + "/control/state")
	if err != nil {
		t.Fatal(err)
	}
	var st fixvenue.State
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 || st.LoggedOn {
		t.Fatalf("state %d %+v %v", resp.StatusCode, st, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// -executions and -own-clordids reach the venue's Config, which refuses what it cannot honour
// before anything listens.
func TestCommandRefusesBadExecutionSettings(t *testing.T) {
	for _, args := range [][]string{{"-executions", "-1"}, {"-executions", "101"}, {"-own-clordids", "letters"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}
