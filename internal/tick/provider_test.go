package tick

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// lineWriter hands each log line to the test as it is written.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// A failed dial names the provider without the key in its URL's query, in the reconnect warning
// and in the status the status page shows: net/http's own error would print the URL whole. The
// logger here masks nothing, so only the engine can keep the key out.
func TestDialErrorHidesTheKeyInTheURL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every dial fails
	const key = "k3y-from-the-query"
	lines := make(lineWriter, 16)
	e := New(Config{URL: "ws://" + addr + "/forex?apiKey=" + key, Key: "test-key", BackoffMin: time.Hour, BackoffMax: time.Hour},
		slog.New(slog.NewTextHandler(lines, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		for {
			select {
			case <-lines:
			case <-done:
				return
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line := <-lines:
			if strings.Contains(line, key) {
				t.Errorf("log line shows the key: %s", line)
			}
			if !strings.Contains(line, "reconnecting") {
				continue
			}
			if !strings.Contains(line, addr+"/forex") || !strings.Contains(line, "connect") {
				t.Errorf("reconnect warning does not say what failed: %s", line)
			}
			if st := e.Status(); st.LastError == "" || strings.Contains(st.LastError, key) {
				t.Errorf("status last error = %q", st.LastError)
			}
			return
		case <-deadline:
			t.Fatal("no reconnect warning within 30s")
		}
	}
}
