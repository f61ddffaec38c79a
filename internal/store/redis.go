package store

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelScheme is the scheme of a Redis URL that names a primary watched by Sentinels:
//
//	redis-sentinel://[user:password@]host:port[,host:port…][/db]?master=NAME
//
// The hosts are the Sentinels (port 26379 when left out; names or IPv4 addresses, as a URL
// cannot list several IPv6 literals), NAME the primary as the Sentinels know it. The userinfo
// authenticates to the primary; the Sentinels are asked without a password.
const SentinelScheme = "redis-sentinel"

// OpenRedis returns a client for the desk's Redis URL (ParseRedisURL): one server for redis://
// and rediss://, and for redis-sentinel:// go-redis's failover client, which asks the Sentinels
// for the primary and asks again when they fail over. Every operation the desk makes touches one
// key, so the same code works on either. Timeouts are short: a dead Redis must cost the lease
// keeper a fraction of a renew period.
func OpenRedis(rawURL string) (redis.UniversalClient, error) {
	opt, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("parse Redis URL: %w", err)
	}
	if opt.MasterName != "" {
		return redis.NewFailoverClient(opt.Failover()), nil
	}
	return redis.NewUniversalClient(opt), nil
}

// ParseRedisURL reads a redis://, rediss:// or redis-sentinel:// URL (SentinelScheme) into the
// options OpenRedis connects with. Its errors never quote the URL, which may hold a password.
func ParseRedisURL(rawURL string) (*redis.UniversalOptions, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, errors.New("not a URL")
	}
	opt := &redis.UniversalOptions{
		DialTimeout:  time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		MaxRetries:   1,
	}
	if u.Scheme != SentinelScheme {
		one, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		opt.Addrs = []string{one.Addr}
		opt.DB, opt.Username, opt.Password, opt.TLSConfig = one.DB, one.Username, one.Password, one.TLSConfig
		return opt, nil
	}

	q := u.Query()
	opt.MasterName = q.Get("master")
	if opt.MasterName == "" {
		return nil, errors.New("a redis-sentinel:// URL names the primary with ?master=NAME")
	}
	for k := range q {
		if k != "master" {
			return nil, fmt.Errorf("a redis-sentinel:// URL takes only ?master=NAME, not %q", k)
		}
	}
	for host := range strings.SplitSeq(u.Host, ",") {
		if host == "" {
			return nil, errors.New("a redis-sentinel:// URL lists its Sentinels as host:port,host:port")
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(host, "26379")
		}
		opt.Addrs = append(opt.Addrs, host)
	}
	if len(opt.Addrs) == 0 {
		return nil, errors.New("a redis-sentinel:// URL lists its Sentinels as host:port,host:port")
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if opt.DB, err = strconv.Atoi(db); err != nil || opt.DB < 0 {
			return nil, fmt.Errorf("database number %q is not a number", db)
		}
	}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	return opt, nil
}
