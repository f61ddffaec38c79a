// Package config reads fxdesk's configuration once, from the environment and flags, and validates
// it. Nothing else in the desk calls os.Getenv.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"fxdesk/internal/auth"
	"fxdesk/internal/redisname"
	"fxdesk/internal/store"
)

// Process names which binary is reading the configuration; it decides defaults and which
// values are allowed.
type Process string

const (
	Web  Process = "web"
	Cron Process = "cron"
)

// CronMode decides where the scheduled jobs run and whether the quote mirror publisher is armed.
type CronMode string

const (
	// CronInline runs every scheduled job inside the web process (single-process install).
	CronInline CronMode = "inline"
	// CronOff leaves scheduled jobs to fxdesk-cron and arms the quote mirror publisher.
	CronOff CronMode = "off"
	// CronOnly is the cron process's implied mode; it never contends for the lease.
	CronOnly CronMode = "only"
)

// Takeover decides whether a web process that lost the boot claim may later become the holder.
type Takeover string

const (
	// TakeoverNever is the default of docs/architecture.md, «Processes and roles»: a follower stays
	// a follower for its whole life; an operator restarts processes to move the desk.
	TakeoverNever Takeover = "never"
	// TakeoverStandby lets a follower re-contend every TTL/3 and take over an expired lease.
	TakeoverStandby Takeover = "standby"
)

// Config is the resolved configuration of one process.
type Config struct {
	Process Process

	MySQLDSN string // FXDESK_MYSQL_DSN, default root@tcp(127.0.0.1:3306)/fxdesk
	RedisURL string // FXDESK_REDIS_URL, default redis://127.0.0.1:6379/0
	// RedisNames names every Redis key and channel of this install from FXDESK_REDIS_PREFIX
	// (default fx, the documented names): pub/sub channels ignore database numbers, so two
	// installs on one Redis server need different prefixes.
	RedisNames redisname.Names
	HTTPAddr   string // FXDESK_HTTP_ADDR, default :4000 (web) or :4001 (cron)
	// AdvertiseURL is the base URL other web processes reach this one at when it holds the lease
	// (FXDESK_ADVERTISE_URL). Empty means derived from the address the server listens on:
	// http://<host, or 127.0.0.1 when unspecified>:<port> (Advertise).
	AdvertiseURL string
	CronMode     CronMode // CRON_MODE, default inline on web; always only on cron

	Feed    string // FXDESK_FEED, default sim; FXDESK_PRICE_SOURCES replaces it (Prices)
	FeedKey string // FXDESK_FEED_KEY, masked in logs
	// SimAddr is FXDESK_SIM_ADDR, default 127.0.0.1:0: where the first bundled feed simulator
	// listens; each further sim source takes the next port (or its own port 0).
	SimAddr string
	// Prices is FXDESK_PRICE_SOURCES and the FXDESK_PRICE_* filter and failover settings.
	Prices   PricesConfig
	Hostname string // FXDESK_HOSTNAME, default os.Hostname()

	LeaseTTL   time.Duration // FXDESK_LEASE_TTL, default 20s
	LeaseFence time.Duration // FXDESK_LEASE_FENCE, default 5s
	// WebInstances is how many web processes the install is configured to run
	// (FXDESK_WEB_INSTANCES, default 1). More than one makes a sibling provable, which is what
	// decides whether a fail-open lease prints its banner.
	WebInstances int
	// Forward sends desk-priced requests from a follower web process to the lease holder
	// (FXDESK_FORWARD, on or off; default on when FXDESK_WEB_INSTANCES > 1).
	Forward bool
	// ClusterSecret signs the node-to-node header of forwarded requests (FXDESK_CLUSTER_SECRET,
	// masked in logs); required, the same on every web process and at least 128 bits strong
	// (CheckClusterSecret), whenever Forward is on or FXDESK_WEB_INSTANCES > 1.
	ClusterSecret string
	// Takeover is FXDESK_TAKEOVER, never (default) or standby; always never on fxdesk-cron, which
	// reads the shared env file and ignores it. Standby needs forwarding: a standby
	// follower is only useful where the holder's traders can reach it, and it must keep sending
	// desk-priced work to whichever process holds the term.
	Takeover Takeover

	MirrorInterval time.Duration // FXDESK_MIRROR_INTERVAL, default 5s
	TrailFlush     time.Duration // FXDESK_TRAIL_FLUSH, default 1s: how often the holder stores moved trailing-stop levels
	// EventsPoll is how often a web process reads the events outbox for its events streams
	// (FXDESK_EVENTS_POLL, default 200ms): one query per process, however many streams are open.
	EventsPoll time.Duration
	// EventsBuffer is how many events one events stream may have unwritten before it is ended and
	// its client resumes from its last id (FXDESK_EVENTS_STREAM_BUFFER, default 1024).
	EventsBuffer int
	// MirrorMaxAge bounds a mirrored mid used for conversion while its session is open
	// (FXDESK_MIRROR_MAX_AGE, default 15m): far above the 30 s trading staleness, because a quiet
	// cross must not lose a correct swap charge over a short gap.
	MirrorMaxAge time.Duration
	// VenueInterval is how often the lease holder runs the venue jobs (FXDESK_VENUE_INTERVAL,
	// default 60s; tests shorten it).
	VenueInterval time.Duration
	// HedgeInterval is the hedger's slow pass on the lease holder (FXDESK_HEDGE_INTERVAL, default
	// 10s): it also passes on every change of a position; the timer is the safety net and the
	// retry of a venue that came back.
	HedgeInterval time.Duration
	Venue         VenueConfig
	Calendar      string // FXDESK_CALENDAR, real or always-open
	Demo          bool   // FXDESK_DEMO
	// Outbox is FXDESK_OUTBOX (default on): off writes no events, only to measure what the outbox
	// costs the order path; a desk running so tells no trader and no host anything.
	Outbox bool
	// Events is the host platform's feed: the events relay, webhooks, retention.
	Events EventsConfig
	// Candles is the price history's flush period and retention.
	Candles CandlesConfig
	// Retention is how the holder prunes and archives the growing tables beside the work.
	Retention RetentionConfig
	// JWT is how the desk checks the tokens its host platform signs (FXDESK_JWT_*; off unless
	// FXDESK_JWT_JWKS_URL is set; docs/identity.md).
	JWT auth.JWTConfig

	// MetricsAddr is FXDESK_METRICS_ADDR: where a token-free /metrics listens for a scraper
	// (default none). The API listener serves /metrics behind the admin token either way.
	MetricsAddr string
	// Limits bound every door of the HTTP API (docs/architecture.md, «The front door»; the table in
	// docs/operations.md, "Front door").
	Limits Limits

	LogFormat string // LOG_FORMAT, text or json
	LogLevel  slog.Level
}

// Load reads the configuration for process p from getenv. It returns every problem it finds at
// once, each phrased so that a person can act on it.
func Load(p Process, getenv func(string) string) (Config, error) {
	env := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	var errs []error
	duration := func(key, def string) time.Duration {
		raw := env(key, def)
		d, err := time.ParseDuration(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q is not a duration (examples: 20s, 1500ms)", key, raw))
		}
		return d
	}

	c := Config{
		Process:        p,
		MySQLDSN:       env("FXDESK_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/fxdesk"),
		RedisURL:       env("FXDESK_REDIS_URL", "redis://127.0.0.1:6379/0"),
		Feed:           env("FXDESK_FEED", "sim"),
		FeedKey:        getenv("FXDESK_FEED_KEY"),
		SimAddr:        env("FXDESK_SIM_ADDR", "127.0.0.1:0"),
		Hostname:       env("FXDESK_HOSTNAME", ""),
		AdvertiseURL:   strings.TrimRight(env("FXDESK_ADVERTISE_URL", ""), "/"),
		LeaseTTL:       duration("FXDESK_LEASE_TTL", "20s"),
		LeaseFence:     duration("FXDESK_LEASE_FENCE", "5s"),
		MirrorInterval: duration("FXDESK_MIRROR_INTERVAL", "5s"),
		TrailFlush:     duration("FXDESK_TRAIL_FLUSH", "1s"),
		EventsPoll:     duration("FXDESK_EVENTS_POLL", "200ms"),
		MirrorMaxAge:   duration("FXDESK_MIRROR_MAX_AGE", "15m"),
		VenueInterval:  duration("FXDESK_VENUE_INTERVAL", "60s"),
		HedgeInterval:  duration("FXDESK_HEDGE_INTERVAL", "10s"),
		Calendar:       env("FXDESK_CALENDAR", "real"),
		LogFormat:      env("LOG_FORMAT", "text"),
	}

	switch p {
	case Web:
		c.HTTPAddr = env("FXDESK_HTTP_ADDR", ":4000")
		mode := env("CRON_MODE", string(CronInline))
		switch CronMode(mode) {
		case CronInline, CronOff:
			c.CronMode = CronMode(mode)
		default:
			errs = append(errs, fmt.Errorf("CRON_MODE=%q is not allowed for fxdesk-web: use inline (scheduled jobs in this process) or off (jobs in fxdesk-cron)", mode))
		}
	case Cron:
		c.HTTPAddr = env("FXDESK_HTTP_ADDR", ":4001")
		// The cron process is always "only". A different value in its environment is most
		// likely a copy of the web process's file; refuse it rather than guess what was meant.
		if mode := env("CRON_MODE", string(CronOnly)); CronMode(mode) != CronOnly {
			errs = append(errs, fmt.Errorf("CRON_MODE=%q is not allowed for fxdesk-cron: it always runs as only (unset CRON_MODE)", mode))
		}
		c.CronMode = CronOnly
	default:
		errs = append(errs, fmt.Errorf("unknown process %q", p))
	}

	if c.Hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			errs = append(errs, fmt.Errorf("FXDESK_HOSTNAME is unset and the host name cannot be read: %w", err))
		}
		c.Hostname = h
	}
	if strings.Contains(c.Hostname, ":") {
		errs = append(errs, fmt.Errorf("FXDESK_HOSTNAME=%q must not contain ':' (the Redis lease value is hostname:pid)", c.Hostname))
	}

	if c.AdvertiseURL != "" {
		if u, err := url.Parse(c.AdvertiseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("FXDESK_ADVERTISE_URL=%q must be a base URL other web processes can reach, such as http://10.0.0.5:4000 (no path)", c.AdvertiseURL))
		}
	}

	n, err := strconv.Atoi(env("FXDESK_WEB_INSTANCES", "1"))
	if err != nil || n < 1 {
		errs = append(errs, fmt.Errorf("FXDESK_WEB_INSTANCES=%q must be a whole number of at least 1", getenv("FXDESK_WEB_INSTANCES")))
	}
	c.WebInstances = n

	switch v := strings.ToLower(env("FXDESK_FORWARD", "")); v {
	case "":
		c.Forward = c.WebInstances > 1
	case "on":
		c.Forward = true
	case "off":
	default:
		errs = append(errs, fmt.Errorf("FXDESK_FORWARD=%q must be on or off", v))
	}
	c.ClusterSecret = strings.TrimSpace(getenv("FXDESK_CLUSTER_SECRET"))
	if p == Web && (c.Forward || c.WebInstances > 1) {
		if c.ClusterSecret == "" {
			errs = append(errs, fmt.Errorf("FXDESK_CLUSTER_SECRET must be set, the same on every web process, when FXDESK_WEB_INSTANCES > 1 or FXDESK_FORWARD=on (it signs the requests followers forward to the lease holder; generate one with: openssl rand -hex 32)"))
		} else if err := CheckClusterSecret(c.ClusterSecret); err != nil {
			errs = append(errs, err)
		}
	}

	// The env file is shared by both binaries, so fxdesk-cron reads FXDESK_TAKEOVER and ignores it:
	// the cron process never contends, whatever the web tier does.
	c.Takeover = TakeoverNever
	switch v := Takeover(strings.ToLower(env("FXDESK_TAKEOVER", string(TakeoverNever)))); v {
	case TakeoverNever:
	case TakeoverStandby:
		if p == Web {
			c.Takeover = v
			if !c.Forward {
				errs = append(errs, errors.New("FXDESK_TAKEOVER=standby needs a forwarding web tier (FXDESK_WEB_INSTANCES > 1 or FXDESK_FORWARD=on, with FXDESK_CLUSTER_SECRET): a standby follower forwards desk-priced work to the holder until it takes over"))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("FXDESK_TAKEOVER=%q must be never (a follower never promotes; the default) or standby (a follower takes over an expired lease)", v))
	}

	if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
		errs = append(errs, fmt.Errorf("FXDESK_MYSQL_DSN is not a valid MySQL DSN (example: root@tcp(127.0.0.1:3306)/fxdesk): %w", err))
	} else if cfg, _ := mysql.ParseDSN(c.MySQLDSN); cfg.DBName == "" {
		errs = append(errs, errors.New("FXDESK_MYSQL_DSN must name a database (example: root@tcp(127.0.0.1:3306)/fxdesk)"))
	}
	if _, err := store.ParseRedisURL(c.RedisURL); err != nil {
		errs = append(errs, fmt.Errorf("FXDESK_REDIS_URL=%q must be a redis:// or rediss:// URL, or redis-sentinel://host:port,host:port/0?master=NAME: %w", maskURL(c.RedisURL), err))
	}
	if names, err := redisname.New(env("FXDESK_REDIS_PREFIX", redisname.DefaultPrefix)); err != nil {
		errs = append(errs, fmt.Errorf("FXDESK_REDIS_PREFIX: %w; give every install sharing a Redis server its own", err))
	} else {
		c.RedisNames = names
	}

	if c.LeaseTTL < 3*time.Second {
		errs = append(errs, fmt.Errorf("FXDESK_LEASE_TTL=%s must be at least 3s", c.LeaseTTL))
	}
	if c.LeaseFence <= 0 || c.LeaseFence >= c.LeaseTTL-c.LeaseTTL/3 {
		errs = append(errs, fmt.Errorf("FXDESK_LEASE_FENCE=%s must be above zero and below the TTL minus one renew interval (%s): otherwise the holder distrusts its lease before it can renew", c.LeaseFence, c.LeaseTTL-c.LeaseTTL/3))
	}
	if c.EventsPoll < 10*time.Millisecond || c.EventsPoll > 10*time.Second {
		errs = append(errs, fmt.Errorf("FXDESK_EVENTS_POLL=%s must be from 10ms to 10s (streams hear an event within one period)", c.EventsPoll))
	}
	if n, err := strconv.Atoi(env("FXDESK_EVENTS_STREAM_BUFFER", "1024")); err != nil || n < 16 || n > 1_000_000 {
		errs = append(errs, fmt.Errorf("FXDESK_EVENTS_STREAM_BUFFER=%q must be a whole number from 16 to 1000000", getenv("FXDESK_EVENTS_STREAM_BUFFER")))
	} else {
		c.EventsBuffer = n
	}
	if c.TrailFlush < 10*time.Millisecond || c.TrailFlush > time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_TRAIL_FLUSH=%s must be between 10ms and 1m: it bounds how much of a trailing stop's move a takeover may lose", c.TrailFlush))
	}
	if c.MirrorInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("FXDESK_MIRROR_INTERVAL=%s must be at least 100ms", c.MirrorInterval))
	}
	if c.MirrorMaxAge < c.MirrorInterval {
		errs = append(errs, fmt.Errorf("FXDESK_MIRROR_MAX_AGE=%s must be at least FXDESK_MIRROR_INTERVAL (%s)", c.MirrorMaxAge, c.MirrorInterval))
	}
	if c.VenueInterval < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_INTERVAL=%s must be at least 100ms", c.VenueInterval))
	}
	if c.HedgeInterval < 100*time.Millisecond || c.HedgeInterval > time.Hour {
		errs = append(errs, fmt.Errorf("FXDESK_HEDGE_INTERVAL=%s must be from 100ms to 1h", c.HedgeInterval))
	}
	c.MetricsAddr = env("FXDESK_METRICS_ADDR", "")
	// Each loader returns its own problems: duration appends to errs meanwhile, and a loader
	// that appended to a copy of errs would overwrite what duration wrote.
	var more []error
	c.Limits, more = loadLimits(env, duration)
	errs = append(errs, more...)
	c.Venue, more = loadVenue(env, duration)
	errs = append(errs, more...)
	c.Events, more = loadEvents(env, duration)
	errs = append(errs, more...)
	c.Candles, more = loadCandles(duration)
	errs = append(errs, more...)
	c.Retention, more = loadRetention(env, duration)
	errs = append(errs, more...)
	c.JWT, more = loadJWT(env, duration)
	errs = append(errs, more...)
	c.Prices, more = loadPrices(getenv, env, duration, c.Feed)
	errs = append(errs, more...)
	if c.Venue.InProcessSim() && p == Web && (c.WebInstances > 1 || c.Takeover == TakeoverStandby) {
		// Each process would run its own in-memory venue: a follower's, or a standby's after a
		// takeover, would not hold the trades the desk's EXTERNAL positions are linked to.
		if c.Venue.IsFIX() {
			errs = append(errs, errors.New("FXDESK_FIX_SESSION=sim runs the FIX venue simulator inside this process, for a single-process install: with FXDESK_WEB_INSTANCES > 1 or FXDESK_TAKEOVER=standby, run fxdesk-fixvenue once and give every web process a session file that points at it"))
		} else {
			errs = append(errs, errors.New("FXDESK_VENUE=sim runs the venue simulator inside this process, for a single-process install: with FXDESK_WEB_INSTANCES > 1 or FXDESK_TAKEOVER=standby, run fxdesk-venuesim once and give every web process its URL"))
		}
	}
	if c.Calendar != "real" && c.Calendar != "always-open" {
		errs = append(errs, fmt.Errorf("FXDESK_CALENDAR=%q must be real or always-open", c.Calendar))
	}
	if c.Feed != "sim" {
		if u, err := url.Parse(c.Feed); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") {
			errs = append(errs, fmt.Errorf("FXDESK_FEED=%q must be sim or a ws:// or wss:// provider URL", maskURL(c.Feed)))
		}
	}

	onOff := func(key string, def bool) bool {
		switch v := strings.ToLower(env(key, "")); v {
		case "":
			return def
		case "0", "false", "off", "no":
			return false
		case "1", "true", "on", "yes":
			return true
		default:
			errs = append(errs, fmt.Errorf("%s=%q must be on or off", key, v))
			return def
		}
	}
	c.Demo = onOff("FXDESK_DEMO", false)
	c.Outbox = onOff("FXDESK_OUTBOX", true)

	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("LOG_FORMAT=%q must be text or json", c.LogFormat))
	}
	if err := c.LogLevel.UnmarshalText([]byte(env("LOG_LEVEL", "info"))); err != nil {
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q must be debug, info, warn or error", getenv("LOG_LEVEL")))
	}

	return c, errors.Join(errs...)
}

// Advertise is the URL this process writes to the lease row when it holds it: FXDESK_ADVERTISE_URL,
// or http://host:port of listening (the address the server actually bound, so port 0 resolves),
// with an unspecified host (":4000", "0.0.0.0", "::") read as 127.0.0.1. Set FXDESK_ADVERTISE_URL
// whenever the web processes run on more than one machine: loopback reaches only this one.
func (c Config) Advertise(listening net.Addr) string {
	if c.AdvertiseURL != "" {
		return c.AdvertiseURL
	}
	host, port, err := net.SplitHostPort(listening.String())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// RenewEvery is how often the lease holder renews: a third of the TTL.
func (c Config) RenewEvery() time.Duration { return c.LeaseTTL / 3 }

// LogValue renders the resolved configuration with secrets masked, for the startup line.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("process", string(c.Process)),
		slog.String("mysql", maskDSN(c.MySQLDSN)),
		slog.String("redis", maskURL(c.RedisURL)),
		slog.String("redisPrefix", c.RedisNames.Prefix()),
		slog.String("http", c.HTTPAddr),
		slog.String("advertiseUrl", c.AdvertiseURL),
		slog.String("cronMode", string(c.CronMode)),
		slog.String("feed", maskURL(c.Feed)),
		slog.String("feedKey", mask(c.FeedKey)),
		slog.String("simAddr", c.SimAddr),
		slog.Any("priceSources", priceSourcesLog(c.Prices.Sources)),
		slog.Group("prices", slog.Float64("floorPips", c.Prices.FloorPips), slog.Float64("bandPips", c.Prices.BandPips),
			slog.Duration("confirm", c.Prices.Confirm), slog.Duration("holdDown", c.Prices.HoldDown),
			slog.Float64("silentFactor", c.Prices.SilentFactor), slog.Duration("silentMin", c.Prices.SilentMin),
			slog.Duration("silentMax", c.Prices.SilentMax)),
		slog.String("hostname", c.Hostname),
		slog.Duration("leaseTTL", c.LeaseTTL),
		slog.Duration("leaseFence", c.LeaseFence),
		slog.Int("webInstances", c.WebInstances),
		slog.Bool("forward", c.Forward),
		slog.String("clusterSecret", mask(c.ClusterSecret)),
		slog.String("takeover", string(c.Takeover)),
		slog.Duration("mirrorInterval", c.MirrorInterval),
		slog.Duration("trailFlush", c.TrailFlush),
		slog.Duration("eventsPoll", c.EventsPoll), slog.Int("eventsStreamBuffer", c.EventsBuffer),
		slog.Duration("mirrorMaxAge", c.MirrorMaxAge),
		slog.Duration("venueInterval", c.VenueInterval),
		slog.Duration("hedgeInterval", c.HedgeInterval),
		slog.Group("venue", slog.String("url", maskURL(c.Venue.URL)), slog.String("fixSession", c.Venue.FIXSession), slog.String("account", c.Venue.Account),
			slog.String("token", mask(c.Venue.Token)), slog.String("simAddr", c.Venue.SimAddr), slog.String("simControlAddr", c.Venue.SimControlAddr),
			slog.Duration("simLatency", c.Venue.SimLatency), slog.Int("concurrency", c.Venue.Concurrency),
			slog.Float64("connectRate", c.Venue.ConnectRate), slog.Duration("timeout", c.Venue.Timeout),
			slog.Duration("notSentAfter", c.Venue.NotSentAfter), slog.String("marginWarn", c.Venue.MarginWarn.String()),
			slog.String("minNAV", c.Venue.MinNAV.String())),
		slog.Group("events", slog.Duration("relayInterval", c.Events.RelayInterval), slog.Int("relayBatch", c.Events.RelayBatch),
			slog.Int64("streamMaxLen", c.Events.StreamMaxLen), slog.Duration("retention", c.Events.Retention),
			slog.Duration("webhookTimeout", c.Events.WebhookTimeout), slog.Int("webhookAttempts", c.Events.WebhookAttempts),
			slog.Duration("webhookBackoff", c.Events.WebhookBackoff), slog.Duration("webhookBackoffMax", c.Events.WebhookBackoffMax)),
		slog.Group("candles", slog.Duration("flush", c.Candles.FlushEvery), slog.Duration("retentionM1", c.Candles.RetentionM1),
			slog.Duration("retentionM5", c.Candles.RetentionM5), slog.Duration("retentionH1", c.Candles.RetentionH1), slog.Duration("retentionD1", c.Candles.RetentionD1)),
		slog.Group("retention", slog.Duration("every", c.Retention.Every), slog.Int("batch", c.Retention.Batch),
			slog.Duration("pause", c.Retention.Pause), slog.Duration("audit", c.Retention.Audit)),
		slog.Group("jwt", slog.String("jwksUrl", maskURL(c.JWT.JWKSURL)), slog.String("issuer", c.JWT.Issuer), slog.String("audience", c.JWT.Audience),
			slog.String("userClaim", c.JWT.UserClaim), slog.String("scopeClaim", c.JWT.ScopeClaim),
			slog.Duration("leeway", c.JWT.Leeway), slog.Duration("refresh", c.JWT.Refresh)),
		slog.String("calendar", c.Calendar),
		slog.Bool("demo", c.Demo),
		slog.String("metricsAddr", c.MetricsAddr),
		slog.Group("limits", slog.Int("maxConns", c.Limits.MaxConns), slog.Duration("readTimeout", c.Limits.ReadTimeout),
			slog.Duration("idleTimeout", c.Limits.IdleTimeout), slog.Duration("writeTimeout", c.Limits.WriteTimeout),
			slog.Int64("bodyBytes", c.Limits.BodyBytes), slog.Int("streamsPerToken", c.Limits.StreamsPerToken),
			slog.Int("streamsPerProcess", c.Limits.StreamsPerProcess), slog.Float64("ratePerToken", c.Limits.RatePerToken),
			slog.Float64("ratePerAddr", c.Limits.RatePerAddr), slog.Int("trustedProxies", len(c.Limits.TrustedProxies)),
			slog.Int("forwardInFlight", c.Limits.ForwardInFlight), slog.Duration("forwardTimeout", c.Limits.ForwardTimeout)),
		slog.String("logFormat", c.LogFormat),
		slog.String("logLevel", c.LogLevel.String()),
	)
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return "****"
}

func maskDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(invalid)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "****"
	}
	return cfg.FormatDSN()
}

// maskURL shows a URL with every credential urlSecrets finds in it masked.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "****")
		} else {
			u.User = url.User("****")
		}
	}
	q := u.Query()
	for k := range q {
		if secretParam(k) {
			q.Set(k, "****")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Secrets are the exact strings this process must never write to a log line (logging.Redact
// masks them in every record): the provider key and the credentials in the feed URL, the venue
// token and the venue URL's credentials, the cluster secret, the MySQL and Redis passwords, and
// any credentials in the host's key set URL.
func (c Config) Secrets() []string {
	out := []string{c.FeedKey, c.Venue.Token, c.ClusterSecret}
	if cfg, err := mysql.ParseDSN(c.MySQLDSN); err == nil {
		out = append(out, cfg.Passwd)
	}
	for _, raw := range []string{c.Feed, c.Venue.URL, c.RedisURL, c.JWT.JWKSURL} {
		out = append(out, urlSecrets(raw)...)
	}
	for _, s := range c.Prices.Sources {
		if s.URL != c.Feed { // the default source is the feed itself
			out = append(out, urlSecrets(s.URL)...)
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// urlSecrets are the credentials written into a URL: the password of its userinfo (the user too
// when it stands alone, as a provider key often does), and the value of every query parameter
// secretParam names. Each is listed as written and decoded, since an error prints the URL as
// written and a client may print what it decoded.
func urlSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil
	}
	var out []string
	both := func(written string, unescape func(string) (string, error)) {
		out = append(out, written)
		if plain, err := unescape(written); err == nil && plain != written {
			out = append(out, plain)
		}
	}
	// The userinfo as written: url.URL keeps it decoded only.
	authority := raw[strings.Index(raw, "//")+2:]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		user, pass, hasPass := strings.Cut(authority[:at], ":")
		if hasPass {
			both(pass, url.PathUnescape)
		} else {
			both(user, url.PathUnescape)
		}
	}
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		k, v, _ := strings.Cut(part, "=")
		if key, err := url.QueryUnescape(k); err == nil && secretParam(key) && v != "" {
			both(v, url.QueryUnescape)
		}
	}
	return out
}

// secretParam is true for a query parameter named like a credential (apiKey, access_token,
// secret, password, auth, signature): its value is masked wherever the URL is shown.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, w := range []string{"key", "token", "secret", "pass", "auth", "sig", "cred"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}
