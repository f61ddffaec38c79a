package main

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/auth"
)

// revocations announces a token's revocation on the Redis channel <prefix>:tokens-revoked (its
// id, never the token) and makes this process forget every token announced there, so that a
// revoked token is refused on every web process at once rather than within auth.CacheFor. A
// lost announcement costs only that: the process refuses the token from its next lookup, within
// auth.CacheFor (docs/identity.md, «Expiry, revocation and last use»).
type revocations struct {
	rdb     redis.UniversalClient
	channel string
	tokens  *auth.Resolver
	log     *slog.Logger
}

// announce is api.Deps.TokenRevoked, and what `fxdesk-web token revoke` calls.
func (v *revocations) announce(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if err := v.rdb.Publish(ctx, v.channel, strconv.FormatInt(id, 10)).Err(); err != nil {
		v.log.WarnContext(ctx, "token revocation not announced: other web processes refuse it within their cache's life",
			slog.Int64("token_id", id), slog.String("channel", v.channel), slog.Duration("cache", auth.CacheFor), slog.Any("err", err))
	}
}

// listen makes the resolver forget every token announced until ctx ends.
func (v *revocations) listen(ctx context.Context) error {
	sub := v.rdb.Subscribe(ctx, v.channel)
	defer sub.Close()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m, ok := <-ch:
			if !ok {
				return nil
			}
			id, err := strconv.ParseInt(m.Payload, 10, 64)
			if err != nil || id <= 0 {
				v.log.WarnContext(ctx, "token revocation announcement ignored: not a token id", slog.String("channel", v.channel), slog.String("payload", m.Payload))
				continue
			}
			v.tokens.Forget(id)
			v.log.InfoContext(ctx, "revoked token forgotten", slog.Int64("token_id", id))
		}
	}
}
