package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisKey is the Redis key that mirrors the lease row: engine:lease:forex-trading under the
// default prefix (internal/redisname holds the rule).
func (k *Keeper) redisKey() string { return k.cfg.Names.EngineLease(k.cfg.Key) }

func parseTag(tag string) Holder {
	host, pid, _ := strings.Cut(tag, ":")
	n, _ := strconv.Atoi(pid)
	return Holder{Hostname: host, PID: n, Live: tag != ""}
}

// refreshScript sets the key to our tag with a fresh TTL and returns {set, previous value}.
// With ARGV[3] = "agree" the row has decided and the key is made to agree whatever it held (the
// previous value is returned so a disagreement can be logged); with "compare" it is refreshed only
// while it still holds our tag.
var refreshScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] or ARGV[3] == 'agree' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, cur or ''}
end
return {0, cur or ''}
`)

// releaseScript deletes the key only while it holds our tag.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

func (k *Keeper) refreshRedis(ctx context.Context, mode string) (set bool, prev string, err error) {
	ctx, cancel := context.WithTimeout(ctx, k.dbTimeout())
	defer cancel()
	v, err := refreshScript.Run(ctx, k.rdb, []string{k.redisKey()}, k.tag, k.cfg.TTL.Milliseconds(), mode).Slice()
	if err != nil {
		return false, "", fmt.Errorf("refresh Redis lease key: %w", err)
	}
	if len(v) != 2 {
		return false, "", fmt.Errorf("refresh Redis lease key: unexpected reply %v", v)
	}
	n, _ := v[0].(int64)
	prev, _ = v[1].(string)
	return n == 1, prev, nil
}

// agreeRedis makes the Redis key agree with the row this process holds.
func (k *Keeper) agreeRedis(ctx context.Context) {
	_, prev, err := k.refreshRedis(ctx, "agree")
	if err != nil {
		if !k.redisWarned {
			k.redisWarned = true
			k.log.WarnContext(ctx, "Redis unreachable; the lease row decides alone", slog.Any("err", err))
		}
		return
	}
	if k.redisWarned {
		k.redisWarned = false
		k.log.InfoContext(ctx, "Redis reachable again; lease key written to agree with the row")
	}
	if prev != "" && prev != k.tag {
		k.sibling = true
		k.log.WarnContext(ctx, "engine lease: Redis key disagreed with the row; rewritten to agree",
			slog.String("redis", prev), slog.String("row", k.tag))
	}
}

func (k *Keeper) setNX(ctx context.Context) (bool, string, error) {
	ok, err := k.rdb.SetArgs(ctx, k.redisKey(), k.tag, redis.SetArgs{Mode: "NX", TTL: k.cfg.TTL}).Result()
	if errors.Is(err, redis.Nil) {
		cur, _ := k.rdb.Get(ctx, k.redisKey()).Result()
		return false, cur, nil
	}
	return err == nil && ok == "OK", "", err
}
