package relay_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/events"
	"fxdesk/internal/relay"
)

// consume is the host platform's side of the stream (docs/events.md, "Reading the stream"): a
// consumer group reads each entry, handles it idempotently by its event id, and acknowledges
// it. Entries a crashed consumer read but never acknowledged are claimed again first ("0"),
// then new ones (">").
func consume(ctx context.Context, rdb *redis.Client, stream, group, consumer string, handle func(id string, fields map[string]any) error) error {
	// Create the group once, reading from the stream's start ("0"; "$" would skip the past).
	if err := rdb.XGroupCreateMkStream(ctx, stream, group, "0").Err(); err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
		return err
	}
	for _, from := range []string{"0", ">"} {
		for {
			res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: group, Consumer: consumer, Streams: []string{stream, from}, Count: 100, Block: 100 * time.Millisecond}).Result()
			if errors.Is(err, redis.Nil) {
				break // nothing new within Block
			}
			if err != nil {
				return err
			}
			if len(res) == 0 || len(res[0].Messages) == 0 {
				break
			}
			for _, m := range res[0].Messages {
				if err := handle(m.Values["id"].(string), m.Values); err != nil {
					return err // not acknowledged: read again from "0" next time
				}
				if err := rdb.XAck(ctx, stream, group, m.ID).Err(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// The host reads the relay's entries through a consumer group and de-duplicates by event id.
func Example_consumerGroup() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: testRedis.Addr})
	defer rdb.Close()
	stream := "example:events"
	rdb.Del(ctx, stream)
	// Two entries as the relay writes them (relay.Fields), the second sent twice after a restart
	// would be refused by Redis; a host de-duplicates by id all the same.
	for _, e := range []events.Entry{
		{ID: 41, AccountID: 7, UserID: 1001, Type: "order.filled", Payload: []byte(`{"id":3}`), Term: 2, CreatedAt: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)},
		{ID: 42, AccountID: 7, UserID: 1001, Type: "position.opened", Payload: []byte(`{"id":9}`), Term: 2, CreatedAt: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)},
	} {
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, ID: relay.EntryID(e.ID), Values: relay.Fields(e)})
	}
	seen := map[string]bool{}
	err := consume(ctx, rdb, stream, "host", "worker-1", func(id string, f map[string]any) error {
		if seen[id] {
			return nil // already handled: the event id is the idempotency key
		}
		seen[id] = true
		fmt.Println(id, f["type"], f["accountId"], f["payload"])
		return nil
	})
	fmt.Println(err)
	// Output:
	// 41 order.filled 7 {"id":3}
	// 42 position.opened 7 {"id":9}
	// <nil>
}
