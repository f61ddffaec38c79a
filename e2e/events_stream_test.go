package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fxdesk/internal/swaps"
)

// The trader's events stream end to end (docs/architecture.md, «Events»): real web processes, a
// holder and a follower, the follower reading the log the holder writes.

// streamedEvent is one server-sent event of the events stream.
type streamedEvent struct {
	ID     int64
	Type   string
	UserID int64
	Data   map[string]any
}

// eventsStream is an open events stream; Close disconnects it.
type eventsStream struct {
	p      *proc
	events chan streamedEvent
	ended  chan struct{}
	Close  context.CancelFunc
}

// openEvents opens p's events stream for tok, resuming after lastID ("" for a fresh stream).
func openEvents(t *testing.T, p *proc, tok, lastID string) *eventsStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/fx/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s events stream = %d %s", p.name, resp.StatusCode, b)
	}
	s := &eventsStream{p: p, events: make(chan streamedEvent, 10000), ended: make(chan struct{}), Close: cancel}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev streamedEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.Type != "":
				s.events <- ev
				ev = streamedEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Type = line[7:]
			case strings.HasPrefix(line, "data: "):
				var data struct {
					ID      int64          `json:"id"`
					Type    string         `json:"type"`
					UserID  int64          `json:"userId"`
					Payload map[string]any `json:"payload"`
				}
				json.Unmarshal([]byte(line[6:]), &data)
				ev.UserID, ev.Data = data.UserID, data.Payload
				if data.ID != ev.ID || data.Type != ev.Type {
					ev.Type = fmt.Sprintf("mismatch: id %d/%d type %s/%s", ev.ID, data.ID, ev.Type, data.Type)
				}
			}
		}
	}()
	return s
}

// until reads events until one has type typ, returning every event read; it fails at the
// deadline or the stream's end.
func (s *eventsStream) until(t *testing.T, typ string) []streamedEvent {
	t.Helper()
	var got []streamedEvent
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev := <-s.events:
			got = append(got, ev)
			if ev.Type == typ {
				return got
			}
		case <-s.ended:
			t.Fatalf("%s events stream ended after %v, before %s", s.p.name, types(got), typ)
		case <-deadline:
			t.Fatalf("%s events stream: no %s within 15s (read %v)", s.p.name, typ, types(got))
		}
	}
}

func types(evs []streamedEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%d:%s", e.ID, e.Type))
	}
	return out
}

// tableEvents reads user's events after id from the database: the truth a stream must match.
func (d *tradingDesk) tableEvents(user, after int64) []streamedEvent {
	t := d.e.t
	t.Helper()
	rows, err := d.e.sql.Query("SELECT `id`, `type`, `userId` FROM `fx_event` WHERE `userId` = ? AND `id` > ? ORDER BY `id`", user, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []streamedEvent
	for rows.Next() {
		var e streamedEvent
		if err := rows.Scan(&e.ID, &e.Type, &e.UserID); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// sameIDs fails unless got and want are the same events (id, type, user) in the same order.
func sameIDs(t *testing.T, what string, got, want []streamedEvent) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = got[i].ID == want[i].ID && got[i].Type == want[i].Type && got[i].UserID == want[i].UserID
	}
	if !ok {
		t.Fatalf("%s: streamed %v, the table holds %v", what, types(got), types(want))
	}
}

// A trader's stream, on the holder and on a follower, sees in order its deposit, its order
// filled and position opened, its SL moved, the gap's SL close, a rollover's swap charge (by
// fxdesk-cron) and its withdrawal — nothing of a
// second trader trading all along; a stream disconnected halfway and resumed with Last-Event-ID
// gets exactly what it missed; the second trader's own stream sees only its own.
func TestEventsStreamSeesOwnChangesInOrder(t *testing.T) {
	t.Parallel()
	// The second trader trades as fast as the desk answers, through both processes, on one
	// token: faster than the per-token rate a trader gets, which is not what this test is about.
	w := newWebTier(t, unlimitedRates...)
	d := w.d
	const mine, theirs = 880, 881
	tok, acct := d.newTrader(mine, "USD", "100", "10000.00")
	otherTok, otherAcct := d.newTrader(theirs, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")

	onHolder := openEvents(t, d.web, tok, "0")
	onFollower := openEvents(t, w.follower, tok, "0") // disconnected halfway
	theirStream := openEvents(t, d.web, otherTok, "0")
	onHolder.until(t, "balance.deposit")
	onFollower.until(t, "balance.deposit")

	// The other trader opens and closes all along, through both processes.
	stop := make(chan struct{})
	var other sync.WaitGroup
	other.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			via := []*proc{d.web, w.follower}[i%2]
			if err := tradeOnce(via, otherTok, otherAcct, fmt.Sprintf("other-%d", i)); err != nil {
				t.Error(err)
				return
			}
		}
	})

	// Through the follower, which forwards them to the holder: a fill, an SL move.
	var o orderResp
	must(t, w.follower, tok, "POST", "/api/fx/orders",
		fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","sl":"1.09000","requestNonce":"ev-open"}`, acct), http.StatusCreated, &o)
	if o.Position == nil {
		t.Fatalf("the market order opened no position: %+v", o)
	}
	must(t, w.follower, tok, "PATCH", fmt.Sprintf("/api/fx/positions/%d", o.Position.ID), `{"sl":"1.09500"}`, http.StatusOK, nil)
	seen := onFollower.until(t, "position.modified")
	onFollower.Close()
	<-onFollower.ended
	resumeAfter := seen[len(seen)-1].ID

	// A gap through the stop: the risk engine closes at the gapped price.
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	wantClose(t, "gapped buy", d.waitClosed(o.Position.ID), "SL", "1.08000")

	// The rollover: a second position, open over the next weekday rollover, is charged its swap
	// by the real fxdesk-cron.
	var o2 orderResp
	must(t, w.follower, tok, "POST", "/api/fx/orders",
		fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","requestNonce":"ev-open-2"}`, acct), http.StatusCreated, &o2)
	ro := firstWeekdayRolloverAfter(time.Now())
	if got := d.e.cronRun(swaps.JobName, ro.At.Add(time.Hour)); got["charged"] < 1 {
		t.Fatalf("swap run as of %s: %v, want a charge", ro.Date, got)
	}

	must(t, w.follower, tok, "POST", fmt.Sprintf("/api/fx/accounts/%d/withdraw", acct), `{"amount":"100.00","requestNonce":"ev-withdraw"}`, http.StatusCreated, nil)
	close(stop)
	other.Wait()
	if t.Failed() {
		return
	}

	all := onHolder.until(t, "balance.withdrawal")
	table := d.tableEvents(mine, 0)
	sameIDs(t, "the holder's stream", all, table[1:]) // the deposit was read before
	var got []string
	for _, e := range all {
		got = append(got, e.Type)
	}
	if want := "order.filled position.opened position.modified position.closed order.filled position.opened swap.charged balance.withdrawal"; strings.Join(got, " ") != want {
		t.Fatalf("the holder's stream: %v, want %s", got, want)
	}
	if closed := all[3].Data; closed["reason"] != "SL" || closed["price"] != "1.08" || closed["id"] != float64(o.Position.ID) {
		t.Fatalf("position.closed payload %v, want the position's SL close at 1.08", closed)
	}
	if sl := all[2].Data["sl"]; sl != "1.095" {
		t.Fatalf("position.modified sl = %v, want 1.095", sl)
	}
	if swap := all[6].Data; swap["positionId"] != float64(o2.Position.ID) || swap["rolloverDate"] != ro.Date {
		t.Fatalf("swap.charged payload %v, want position %d on %s", swap, o2.Position.ID, ro.Date)
	}

	// Resumed on the follower after the last id it wrote: exactly what it missed.
	resumed := openEvents(t, w.follower, tok, strconv.FormatInt(resumeAfter, 10))
	missed := resumed.until(t, "balance.withdrawal")
	sameIDs(t, "the follower's stream resumed with Last-Event-ID", missed, d.tableEvents(mine, resumeAfter))
	if len(missed) != 5 {
		t.Fatalf("resumed stream: %v, want the SL close, the second fill, the swap and the withdrawal", types(missed))
	}

	// The other trader's stream: every event of theirs, in order, and nothing of mine.
	theirTable := d.tableEvents(theirs, 0)
	if len(theirTable) < 3 {
		t.Fatalf("the other trader wrote %d events", len(theirTable))
	}
	lastType := theirTable[len(theirTable)-1].Type
	var theirsGot []streamedEvent
	for len(theirsGot) == 0 || theirsGot[len(theirsGot)-1].ID < theirTable[len(theirTable)-1].ID {
		theirsGot = append(theirsGot, theirStream.until(t, lastType)...)
	}
	sameIDs(t, "the other trader's stream", theirsGot, theirTable)

	// Nothing further arrives on my streams: the other trader's activity never showed.
	for _, s := range []*eventsStream{onHolder, resumed} {
		select {
		case ev := <-s.events:
			t.Fatalf("%s stream showed %+v after the withdrawal", s.p.name, ev)
		default:
		}
	}
	eventually(t, 5*time.Second, 20*time.Millisecond, "the follower counts one stream (the resumed one)", func() bool {
		n, _ := metricValue(w.follower.metrics(), "fxdesk_event_stream_subscribers")
		return n == "1"
	})

	// A graceful stop ends the open stream before the server drains, so the drain waits for
	// nothing.
	w.follower.stop(syscall.SIGTERM)
	select {
	case <-resumed.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the follower stopped and its events stream did not end")
	}
	if _, ok := w.follower.findLog(msgIs("http server did not drain in time")); ok {
		t.Fatal("the follower's server did not drain: a stream outlived the shutdown")
	}
	w.follower.waitLog(time.Second, msgIs("fxdesk-web stopped"))
}

// tradeOnce opens and closes a small position through p; it only returns its error, so a
// goroutine other than the test's may call it.
func tradeOnce(p *proc, tok string, acct int64, nonce string) error {
	send := func(method, path, body string, want int, v any) error {
		req, _ := http.NewRequest(method, "http://"+p.addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			return fmt.Errorf("%s %s via %s = %d %s", method, path, p.name, resp.StatusCode, b)
		}
		if v != nil {
			return json.Unmarshal(b, v)
		}
		return nil
	}
	var o orderResp
	if err := send("POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.01","requestNonce":%q}`, acct, nonce), http.StatusCreated, &o); err != nil {
		return err
	}
	if o.Position == nil {
		return fmt.Errorf("order %s opened no position", nonce)
	}
	return send("POST", fmt.Sprintf("/api/fx/positions/%d/close", o.Position.ID), "", http.StatusOK, nil)
}
