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

	"fxdesk/internal/sim/venuesim"
)

// TestCommandPrintsBothURLsAndStopsOnCancel starts the command on port 0, reads the URLs it prints,
// checks both APIs answer, and stops it with the context as a signal would.
func TestCommandPrintsBothURLsAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "VENUESIM_TOKEN" {
			return "env-token"
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"-latency", "0", "-account", "acct-1"}, getenv, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no URLs printed: %v", err)
	}
	go io.Copy(io.Discard, outR)
	url, control, account, err := venuesim.ParseListening(line)
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasPrefix(control, "http://127.0.0.1:") || account != "acct-1" {
		t.Fatalf("printed %q: %v", line, err)
	}

	req, _ := http.NewRequest(http.MethodGet, url+"/v3/accounts/acct-1/summary", nil)
	req.Header.Set("Authorization", "Bearer env-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("summary with the token from the environment: %d", resp.StatusCode)
	}

	resp, err = http.Get(control + "/control/state")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		LatencyMS float64 `json:"latencyMs"`
		Requests  map[string]int
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || st.LatencyMS != 0 || st.Requests["GET /summary"] != 1 {
		t.Fatalf("state: %v %+v", err, st)
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
	noenv := func(string) string { return "" }
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-latency", "-1s"}, {"-feed-control", "localhost:1"}} {
		if err := run(context.Background(), args, noenv, io.Discard, io.Discard); err == nil {
			t.Fatalf("run %q accepted", args)
		}
	}
}
