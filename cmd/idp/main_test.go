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

	"fxdesk/internal/idp"
	"fxdesk/internal/testkit/poll"
)

// The command listens where FXDESK_IDP_ADDR says, prints its key set's URL with the issuer and
// audience its tokens carry, mints with the algorithm asked for, and stops on cancel as on a
// signal.
func TestCommandPrintsItsKeySetAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	getenv := func(k string) string {
		if k == "FXDESK_IDP_ADDR" {
			return "127.0.0.1:0"
		}
		return ""
	}
	go func() {
		done <- run(ctx, []string{"-issuer", "https://host.example", "-alg", "RS256"}, getenv, outW, io.Discard)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("nothing printed: %v", err)
	}
	go io.Copy(io.Discard, outR)
	fields := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "idp listening ")) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	jwks := fields["jwks"]
	if !strings.HasPrefix(line, "idp listening ") || !strings.HasPrefix(jwks, "http://127.0.0.1:") || !strings.HasSuffix(jwks, idp.JWKSPath) ||
		fields["issuer"] != "https://host.example" || fields["audience"] != "fxdesk" {
		t.Fatalf("printed %q", line)
	}
	resp, err := http.Get(jwks)
	if err != nil {
		t.Fatal(err)
	}
	var set struct{ Keys []struct{ Alg string } }
	err = json.NewDecoder(resp.Body).Decode(&set)
	resp.Body.Close()
	if err != nil || len(set.Keys) != 1 || set.Keys[0].Alg != idp.RS256 {
		t.Fatalf("key set %+v: %v", set, err)
	}
	resp, err = http.Post(strings.TrimSuffix(jwks, idp.JWKSPath)+"/mint", "application/json", strings.NewReader(`{"sub":"42"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mint: %d", resp.StatusCode)
	}
	cancel()
	if err, ok := poll.Receive(t, done, 5*time.Second, "run returning after cancel"); ok && err != nil {
		t.Fatalf("run: %v", err)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	noenv := func(string) string { return "" }
	for _, args := range [][]string{{"-nope"}, {"extra"}, {"-alg", "HS256", "-addr", "127.0.0.1:0"}, {"-issuer", "", "-addr", "127.0.0.1:0"}, {"-addr", "nowhere:-1"}} {
		if err := run(context.Background(), args, noenv, io.Discard, io.Discard); err == nil {
			t.Fatalf("run %q accepted", args)
		}
	}
	if err := run(context.Background(), []string{"-addr", "127.0.0.1:0"}, func(k string) string { return map[string]string{"LOG_FORMAT": "xml"}[k] }, io.Discard, io.Discard); err == nil {
		t.Fatal("LOG_FORMAT=xml accepted")
	}
}
