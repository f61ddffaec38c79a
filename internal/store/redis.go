package store

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// OpenRedis returns a universal client for a redis:// or rediss:// URL. Every operation the desk
// makes touches one key, so the same code works on a single server, Sentinel or Cluster.
// Timeouts are short: a dead Redis must cost the lease keeper a fraction of a renew period.
func OpenRedis(rawURL string) (redis.UniversalClient, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse Redis URL: %w", err)
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:        []string{opt.Addr},
		DB:           opt.DB,
		Username:     opt.Username,
		Password:     opt.Password,
		TLSConfig:    opt.TLSConfig,
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   1,
	}), nil
}
