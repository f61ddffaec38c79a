package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/catalog"
)

// termsNotices tells the lease holder's TermsFollower that an admin write was answered, so it
// reads the audit log now instead of at its next poll: in this process directly when it is the
// holder, and on the Redis channel <prefix>:terms-changed for a holder elsewhere. A notice only
// hastens the read: one lost (Redis away, a resubscription) is read at the next poll,
// catalog.TermsPoll later at most (docs/groups.md, "How a change reaches the risk engine").
type termsNotices struct {
	rdb     redis.UniversalClient
	channel string
	log     *slog.Logger
	// follower is the holder's, set when this process starts its holder parts.
	follower atomic.Pointer[catalog.TermsFollower]
}

// publishTimeout bounds a notice's publish: the admin's answer waits for it.
const publishTimeout = time.Second

// written is api.Deps.AdminWritten.
func (n *termsNotices) written(ctx context.Context, what string) {
	if f := n.follower.Load(); f != nil {
		f.Wake()
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := n.rdb.Publish(ctx, n.channel, what).Err(); err != nil {
		n.log.WarnContext(ctx, "terms notice not published: the lease holder reads the audit log at its next poll",
			slog.String("channel", n.channel), slog.Duration("poll", catalog.TermsPoll), slog.Any("err", err))
	}
}

// listen wakes f at every notice until ctx ends, and at every (re)subscription: notices sent
// while the subscription was down are lost, so the log is read then as if notified.
func (n *termsNotices) listen(ctx context.Context, f *catalog.TermsFollower) error {
	sub := n.rdb.Subscribe(ctx, n.channel)
	defer sub.Close()
	ch := sub.ChannelWithSubscriptions()
	n.log.InfoContext(ctx, "admin changes followed for the risk engine: the audit log, woken by notices", slog.String("channel", n.channel),
		slog.Duration("poll", catalog.TermsPoll))
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-ch:
			if !ok {
				return nil
			}
			f.Wake()
		}
	}
}
