package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCommandPrintsItsURLAndStopsOnCancel starts the command on port 0, reads the URL it prints,
// checks the control API answers, and stops it with the context as a signal would.
func TestCommandPrintsItsURLAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-always-open", "-seed", "7"}, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v", err)
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "ws://127.0.0.1:") || !strings.HasSuffix(url, "/forex") {
		t.Fatalf("printed %q", url)
	}
	go io.Copy(io.Discard, outR)
	state := "http://" + strings.TrimSuffix(strings.TrimPrefix(url, "ws://"), "/forex") + "/control/state"
	resp, err := http.Get(state)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Symbols    []struct{ Symbol string }
		MarketSeed uint64
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Symbols) < 32 || st.MarketSeed != 7 {
		t.Fatalf("state: %v, %d symbols, market seed %d (want 7: -seed makes twins agree)", err, len(st.Symbols), st.MarketSeed)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	if err := run(context.Background(), []string{"-nope"}, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown flag accepted")
	}
	if err := run(context.Background(), []string{"extra"}, io.Discard, io.Discard); err == nil {
		t.Fatal("stray argument accepted")
	}
}
