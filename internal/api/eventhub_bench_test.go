package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"fxdesk/internal/events"
	"fxdesk/internal/metrics"
)

// The hub's hand-out of one page of 500 events (format once, offer to the streams of each
// event's user) with 1,000 streams open over 500 users: its cost per page is what one poll
// costs the process beyond the query, whatever the number of streams that hear nothing.
func BenchmarkEventHubHandOut(b *testing.B) {
	m := metrics.New("bench")
	h := NewEventHub(EventHubConfig{Slots: NewStreamSlots(10, 10000, m), Poll: time.Second, Buffer: 1 << 20, Metrics: m, Log: slog.New(slog.DiscardHandler)})
	h.readyOnce.Do(func() { close(h.ready) })
	for i := range 1000 {
		if _, _, err := h.join(context.Background(), "token"+strconv.Itoa(i), int64(i%500), 0); err != nil {
			b.Fatal(err)
		}
	}
	payload, _ := json.Marshal(events.Balance{AccountID: 1, Type: "DEPOSIT", Amount: "10.00", BalanceAfter: "110.00", Currency: "USD", IdempotencyKey: "k", Comment: ""})
	page := make([]events.Entry, 500)
	for i := range page {
		page[i] = events.Entry{ID: int64(i + 1), AccountID: int64(i), UserID: int64(i), Type: string(events.Deposit), Payload: payload, CreatedAt: time.Now()}
	}
	b.ReportAllocs()
	for b.Loop() {
		h.handOut(page)
		for _, set := range h.byUser { // keep the buffers from filling
			for s := range set {
				for len(s.frames) > 0 {
					<-s.frames
				}
			}
		}
	}
}
