package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/testkit/poll"
)

// One encoding for every event payload, wherever it is served (docs/events.md): for each event a
// trader's changes write — fills and openings among them, whose ids the batch splices in as it
// runs — the payload's bytes on the events page, on the trader's events stream, in the Redis
// Stream and in a webhook post are the same, and are encoding/json's compact form.
func TestEventPayloadIsTheSameBytesEverywhere(t *testing.T) {
	t.Parallel()
	d := newTradingDesk(t)
	e := d.e
	posts := newBodyReceiver(t)
	must(t, d.web, d.admin, "POST", "/api/admin/fx/webhooks", fmt.Sprintf(`{"url":%q,"secret":"bytes-endpoint-secret-1"}`, posts.srv.URL), http.StatusCreated, nil)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(1201, "USD", "100", "10000.00")
	sse := openRawEvents(t, d.web, tok)
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	pos := d.openMarket(tok, acct, "BUY", "0.20", "")
	must(t, d.web, tok, "PATCH", fmt.Sprintf("/api/fx/positions/%d", pos), `{"sl":"1.09000"}`, http.StatusOK, nil)
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", pos), `{"volume":"0.10"}`, http.StatusOK, nil)
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", pos), "", http.StatusOK, nil)
	var cancelled, resting orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.08000"}`, acct), http.StatusCreated, &cancelled)
	must(t, d.web, tok, "DELETE", fmt.Sprintf("/api/fx/orders/%d", cancelled.Order.ID), "", http.StatusOK, nil)
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"LIMIT","volume":"0.10","price":"1.09500"}`, acct), http.StatusCreated, &resting)
	d.setQuote(tok, "EURUSD", "1.09480", "1.09500") // the ask reaches the limit: triggered
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the resting order triggered", func() bool {
		var status string
		e.sql.QueryRow("SELECT `status` FROM `fx_order` WHERE `id` = ?", resting.Order.ID).Scan(&status)
		return status == "FILLED"
	})
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"100.00"}`, http.StatusCreated, nil)

	table := d.tableEvents(1201, 0)
	want := "balance.deposit order.filled position.opened position.modified position.partly_closed position.closed order.accepted order.cancelled order.accepted order.triggered position.opened balance.withdrawal"
	var got []string
	for _, ev := range table {
		got = append(got, ev.Type)
	}
	if strings.Join(got, " ") != want {
		t.Fatalf("the trader's events: %v, want %s", types(table), want)
	}
	last := table[len(table)-1].ID

	// The events page.
	var page struct {
		Events []struct {
			ID      int64           `json:"id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	must(t, d.web, tok, "GET", "/api/fx/events?after=0", "", http.StatusOK, &page)
	onPage := map[int64]string{}
	for _, ev := range page.Events {
		onPage[ev.ID] = string(ev.Payload)
	}
	// The trader's events stream, the Redis Stream, a webhook post.
	onSSE := sse.until(t, last)
	var onStream map[int64]string
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the Redis Stream holding the trader's last event", func() bool {
		onStream = streamPayloads(t, e)
		_, ok := onStream[last]
		return ok
	})
	onWebhook := posts.until(t, last)

	for _, ev := range table {
		p := onPage[ev.ID]
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(p)); err != nil || compact.String() != p {
			t.Errorf("%s (event %d): the page's payload %s is not compact JSON (%v)", ev.Type, ev.ID, p, err)
		}
		for where, got := range map[string]string{"events stream": onSSE[ev.ID], "Redis Stream": onStream[ev.ID], "webhook": onWebhook[ev.ID]} {
			if got != p {
				t.Errorf("%s (event %d): the %s serves %s\n\tthe page serves %s", ev.Type, ev.ID, where, got, p)
			}
		}
	}
}

// streamPayloads is every entry's payload field in the desk's Redis Stream, by event id.
func streamPayloads(t *testing.T, e *deskEnv) map[int64]string {
	t.Helper()
	msgs, err := e.rdb.XRange(context.Background(), e.names.Events(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]string{}
	for _, m := range msgs {
		var id int64
		fmt.Sscan(m.Values["id"].(string), &id)
		out[id] = m.Values["payload"].(string)
	}
	return out
}

// rawEvents is a trader's events stream read for its payloads' bytes.
type rawEvents struct {
	mu       sync.Mutex
	payloads map[int64]string
}

func openRawEvents(t *testing.T, p *proc, tok string) *rawEvents {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/fx/events/stream?after=0", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("events stream = %d", resp.StatusCode)
	}
	r := &rawEvents{payloads: map[int64]string{}}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				ID      int64           `json:"id"`
				Payload json.RawMessage `json:"payload"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil {
				r.mu.Lock()
				r.payloads[ev.ID] = string(ev.Payload)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// until waits for event id on the stream and returns every payload seen so far.
func (r *rawEvents) until(t *testing.T, id int64) map[int64]string {
	t.Helper()
	var out map[int64]string
	poll.Until(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("event %d on the events stream", id), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.payloads[id]
		if ok {
			out = map[int64]string{}
			for k, v := range r.payloads {
				out[k] = v
			}
		}
		return ok
	})
	return out
}

// bodyReceiver is a webhook endpoint that accepts every post and keeps each event's payload as
// posted.
type bodyReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	payloads map[int64]string
}

func newBodyReceiver(t *testing.T) *bodyReceiver {
	r := &bodyReceiver{payloads: map[int64]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			ID      int64           `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(body, &ev) == nil {
			r.mu.Lock()
			r.payloads[ev.ID] = string(ev.Payload)
			r.mu.Unlock()
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *bodyReceiver) until(t *testing.T, id int64) map[int64]string {
	t.Helper()
	var out map[int64]string
	poll.Until(t, 10*time.Second, 20*time.Millisecond, fmt.Sprintf("event %d posted to the webhook", id), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.payloads[id]
		if ok {
			out = map[int64]string{}
			for k, v := range r.payloads {
				out[k] = v
			}
		}
		return ok
	})
	return out
}
