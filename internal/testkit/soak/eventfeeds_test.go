package soak

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/testkit/soak/invariant"
)

// An events stream client records whole frames only, and resumes after the last one it has —
// with ?after= the first time, Last-Event-ID after — when a stream ends or goes quiet.
func TestEventClientResumesAfterItsLastFrame(t *testing.T) {
	type request struct{ after, lastEventID, auth, forwarded string }
	var mu sync.Mutex
	var got []request
	frame := func(w http.ResponseWriter, id int64, typ string) {
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: {\"id\":%d,\"accountId\":7,\"type\":%q}\n\n", id, typ, id, typ)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(got)
		got = append(got, request{r.URL.Query().Get("after"), r.Header.Get("Last-Event-ID"), r.Header.Get("Authorization"), r.Header.Get("X-Forwarded-For")})
		mu.Unlock()
		if n == 1 {
			http.Error(w, `{"error":"busy"}`, http.StatusTooManyRequests) // refused: tried again
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprint(w, ": fxdesk events stream\n\n")
		switch n {
		case 0: // two frames, then half a third, then the end
			frame(w, 1, "balance.deposit")
			fmt.Fprint(w, ": keep-alive\n\n")
			frame(w, 2, "order.filled")
			fmt.Fprint(w, "id: 3\nevent: position.opened\n")
			fl.Flush()
		case 2: // one frame, then silence until the client gives up
			frame(w, 3, "position.opened")
			fl.Flush()
			<-r.Context().Done()
		default:
			frame(w, 4, "position.closed")
			fl.Flush()
			<-r.Context().Done()
		}
	}))
	defer srv.Close()

	c := &cluster{procs: []*proc{{name: "web1", kind: "web", addr: strings.TrimPrefix(srv.URL, "http://"), done: make(chan struct{})}}}
	ec := newEventClient(&trader{name: "t1", user: 1001, token: "tok", c: c}, 1, 0)
	ec.idle = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ec.run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for ec.last() < 4 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done

	r := ec.record()
	want := []invariant.SeenEvent{{ID: 1, Type: "balance.deposit", Account: 7}, {ID: 2, Type: "order.filled", Account: 7},
		{ID: 3, Type: "position.opened", Account: 7}, {ID: 4, Type: "position.closed", Account: 7}}
	if !slices.Equal(r.Seen, want) || r.Connects != 3 || r.Refused != 1 {
		t.Fatalf("seen %v, %d streams, %d refused; want %v, 3 streams, 1 refused", r.Seen, r.Connects, r.Refused, want)
	}
	wantReqs := []request{{"0", "", "Bearer tok", clientAddress("t1")}, {"", "2", "Bearer tok", clientAddress("t1")},
		{"", "2", "Bearer tok", clientAddress("t1")}, {"", "3", "Bearer tok", clientAddress("t1")}}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, wantReqs) {
		t.Fatalf("requests %v, want %v", got, wantReqs)
	}
}

func TestStreamEntryAndNextEntryID(t *testing.T) {
	e := streamEntry(redis.XMessage{ID: "12-0", Values: map[string]any{"id": "12", "accountId": "3", "userId": "1001", "type": "balance.deposit"}})
	if e != (invariant.StreamEntry{EntryID: "12-0", ID: 12, Account: 3, User: 1001, Type: "balance.deposit"}) {
		t.Fatalf("entry %+v", e)
	}
	if e := streamEntry(redis.XMessage{ID: "13-0", Values: map[string]any{"id": "x", "accountId": "3", "type": "t"}}); e.Unreadable != "id=x userId=<nil>" {
		t.Fatalf("unreadable %q, want both bad fields named", e.Unreadable)
	}
	if next, err := nextEntryID("12-0"); err != nil || next != "12-1" {
		t.Fatalf("next of 12-0: %q %v", next, err)
	}
	if _, err := nextEntryID("12"); err == nil {
		t.Fatal("an id without a sequence accepted")
	}
}
