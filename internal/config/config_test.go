package config

import (
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDefaultsMakeASingleProcessDesk(t *testing.T) {
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.CronMode != CronInline || c.HTTPAddr != ":4000" || c.LeaseTTL != 20*time.Second || c.LeaseFence != 5*time.Second ||
		c.RenewEvery() != 20*time.Second/3 || c.Takeover != TakeoverNever || c.Feed != "sim" || c.MirrorInterval != 5*time.Second || c.WebInstances != 1 ||
		c.EventsPoll != 200*time.Millisecond || c.EventsBuffer != 1024 {
		t.Fatalf("defaults = %+v", c)
	}
	// The env file both binaries read may ask the web tier for standby: the cron process ignores it.
	cron, err := Load(Cron, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_TAKEOVER": "standby"}))
	if err != nil || cron.CronMode != CronOnly || cron.HTTPAddr != ":4001" || cron.Takeover != TakeoverNever {
		t.Fatalf("cron defaults = %+v, %v", cron, err)
	}
}

// Each bad value is refused with a message that names the variable and what would be accepted.
func TestBadValuesAreRefusedWithAnActionableMessage(t *testing.T) {
	for _, tc := range []struct {
		proc Process
		kv   map[string]string
		want []string
	}{
		{Web, map[string]string{"CRON_MODE": "only"}, []string{"CRON_MODE", "inline", "off"}},
		{Web, map[string]string{"CRON_MODE": "INLINE"}, []string{"CRON_MODE", "inline", "off"}},
		{Cron, map[string]string{"CRON_MODE": "off"}, []string{"CRON_MODE", "only"}},
		{Web, map[string]string{"FXDESK_LEASE_TTL": "2s"}, []string{"FXDESK_LEASE_TTL", "3s"}},
		{Web, map[string]string{"FXDESK_LEASE_TTL": "twenty"}, []string{"FXDESK_LEASE_TTL", "duration"}},
		// A duration read by a group's loader is named as one too, beside the group's own checks.
		{Web, map[string]string{"FXDESK_HTTP_IDLE_TIMEOUT": "later", "FXDESK_WEBHOOK_TIMEOUT": "soon"},
			[]string{`FXDESK_HTTP_IDLE_TIMEOUT="later" is not a duration`, `FXDESK_WEBHOOK_TIMEOUT="soon" is not a duration`}},
		{Web, map[string]string{"FXDESK_VENUE": "sim", "FXDESK_VENUE_TIMEOUT": "long"}, []string{`FXDESK_VENUE_TIMEOUT="long" is not a duration`}},
		// The fence must leave room for a renew inside the trust window.
		{Web, map[string]string{"FXDESK_LEASE_TTL": "3s", "FXDESK_LEASE_FENCE": "2s"}, []string{"FXDESK_LEASE_FENCE"}},
		{Web, map[string]string{"FXDESK_HOSTNAME": "a:b"}, []string{"FXDESK_HOSTNAME", ":"}},
		{Web, map[string]string{"FXDESK_WEB_INSTANCES": "0"}, []string{"FXDESK_WEB_INSTANCES"}},
		{Web, map[string]string{"FXDESK_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/"}, []string{"FXDESK_MYSQL_DSN", "database"}},
		{Web, map[string]string{"FXDESK_REDIS_URL": "http://x"}, []string{"FXDESK_REDIS_URL"}},
		{Web, map[string]string{"FXDESK_REDIS_URL": "redis-sentinel://s1:26379,s2:26379/0"}, []string{"FXDESK_REDIS_URL", "?master=NAME"}},
		// The prefix names keys and channels: no separator, no glob characters, short.
		{Web, map[string]string{"FXDESK_REDIS_PREFIX": "prod:eu"}, []string{"FXDESK_REDIS_PREFIX", "prod:eu", "1 to 32 letters"}},
		{Cron, map[string]string{"FXDESK_REDIS_PREFIX": "fx*"}, []string{"FXDESK_REDIS_PREFIX", "1 to 32 letters"}},
		{Web, map[string]string{"FXDESK_REDIS_PREFIX": strings.Repeat("p", 33)}, []string{"FXDESK_REDIS_PREFIX", "1 to 32 letters"}},
		{Web, map[string]string{"FXDESK_FEED": "tcp://x"}, []string{"FXDESK_FEED", "sim"}},
		{Web, map[string]string{"FXDESK_CALENDAR": "weekdays"}, []string{"FXDESK_CALENDAR", "always-open"}},
		{Web, map[string]string{"FXDESK_MIRROR_INTERVAL": "10s", "FXDESK_MIRROR_MAX_AGE": "5s"}, []string{"FXDESK_MIRROR_MAX_AGE"}},
		// The events streams' reader: often enough to feel live, rarely enough to cost nothing.
		{Web, map[string]string{"FXDESK_EVENTS_POLL": "1ms"}, []string{"FXDESK_EVENTS_POLL", "10ms", "10s"}},
		{Web, map[string]string{"FXDESK_EVENTS_POLL": "1m"}, []string{"FXDESK_EVENTS_POLL", "10ms", "10s"}},
		{Web, map[string]string{"FXDESK_EVENTS_STREAM_BUFFER": "8"}, []string{"FXDESK_EVENTS_STREAM_BUFFER", "16"}},
		{Web, map[string]string{"FXDESK_EVENTS_STREAM_BUFFER": "lots"}, []string{"FXDESK_EVENTS_STREAM_BUFFER", "whole number"}},
		{Web, map[string]string{"LOG_FORMAT": "xml"}, []string{"LOG_FORMAT"}},
		{Web, map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}},
		{Web, map[string]string{"FXDESK_DEMO": "maybe"}, []string{"FXDESK_DEMO"}},
		{Cron, map[string]string{"FXDESK_OUTBOX": "sometimes"}, []string{"FXDESK_OUTBOX", "on or off"}},
		// Two web processes forward to the holder, which needs the shared secret to sign with.
		{Web, map[string]string{"FXDESK_WEB_INSTANCES": "2"}, []string{"FXDESK_CLUSTER_SECRET", "FXDESK_WEB_INSTANCES"}},
		// A weak secret is refused by its estimated strength, and the message says how to make one.
		{Web, map[string]string{"FXDESK_FORWARD": "on", "FXDESK_CLUSTER_SECRET": "short"}, []string{"FXDESK_CLUSTER_SECRET", "128 bits", "openssl rand -hex 32"}},
		{Web, map[string]string{"FXDESK_FORWARD": "on", "FXDESK_CLUSTER_SECRET": "aaaaaaaaaaaaaaaa"}, []string{"FXDESK_CLUSTER_SECRET", "0 bits", "openssl rand -hex 32"}},
		{Web, map[string]string{"FXDESK_WEB_INSTANCES": "2", "FXDESK_CLUSTER_SECRET": "0123456789abcdef0123"}, []string{"FXDESK_CLUSTER_SECRET", "80 bits"}},
		{Web, map[string]string{"FXDESK_FORWARD": "yes"}, []string{"FXDESK_FORWARD", "on or off"}},
		// Standby takeover is opt-in, and only where followers forward to the holder.
		{Web, map[string]string{"FXDESK_TAKEOVER": "auto"}, []string{"FXDESK_TAKEOVER", "never", "standby"}},
		{Web, map[string]string{"FXDESK_TAKEOVER": "standby"}, []string{"FXDESK_TAKEOVER", "FXDESK_FORWARD", "FXDESK_CLUSTER_SECRET"}},
		{Web, map[string]string{"FXDESK_ADVERTISE_URL": "10.0.0.5:4000"}, []string{"FXDESK_ADVERTISE_URL", "http://"}},
		{Web, map[string]string{"FXDESK_ADVERTISE_URL": "http://10.0.0.5:4000/api"}, []string{"FXDESK_ADVERTISE_URL", "no path"}},
	} {
		kv := map[string]string{"FXDESK_HOSTNAME": "box"}
		for k, v := range tc.kv {
			kv[k] = v
		}
		_, err := Load(tc.proc, env(kv))
		if err == nil {
			t.Errorf("%s %v: accepted", tc.proc, tc.kv)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: %q does not mention %q", tc.proc, tc.kv, err, w)
			}
		}
	}
}

// The advertised URL defaults to the address the server bound, with an unspecified host read as
// loopback; a configured one wins whatever the listener.
func TestAdvertiseDefaultsToTheListenAddress(t *testing.T) {
	for _, tc := range []struct{ configured, listening, want string }{
		{"", "0.0.0.0:4000", "http://127.0.0.1:4000"},
		{"", "[::]:4000", "http://127.0.0.1:4000"},
		{"", "10.0.0.5:43121", "http://10.0.0.5:43121"},
		{"", "[fd00::5]:4000", "http://[fd00::5]:4000"},
		{"https://web-1.desk.internal/", "0.0.0.0:4000", "https://web-1.desk.internal"},
	} {
		c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_ADVERTISE_URL": tc.configured}))
		if err != nil {
			t.Fatal(err)
		}
		addr, err := net.ResolveTCPAddr("tcp", tc.listening)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Advertise(addr); got != tc.want {
			t.Errorf("Advertise(%q) with %q configured = %q, want %q", tc.listening, tc.configured, got, tc.want)
		}
	}
}

func TestSecretsAreMaskedInTheStartupLine(t *testing.T) {
	c, err := Load(Web, env(map[string]string{
		"FXDESK_HOSTNAME":       "box",
		"FXDESK_MYSQL_DSN":      "fx:s3cret@tcp(db:3306)/fxdesk",
		"FXDESK_REDIS_URL":      "redis://:hunter2@cache:6379/0",
		"FXDESK_FEED":           "wss://feed.example/forex?apiKey=k3y",
		"FXDESK_FEED_KEY":       "k3y",
		"FXDESK_WEB_INSTANCES":  "2",
		"FXDESK_CLUSTER_SECRET": "node-s3cret-9f86d081884c7d659a2feaa0c55ad015",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Forward {
		t.Error("two web instances do not forward by default")
	}
	line := c.LogValue().String()
	for _, secret := range []string{"s3cret", "hunter2", "k3y", "node-s3cret"} {
		if strings.Contains(line, secret) {
			t.Errorf("startup line shows %q: %s", secret, line)
		}
	}
}

// The Redis prefix defaults to fx, whose names are the documented ones, is read by both binaries
// alike (they must agree on every name), and shows in the startup line.
func TestRedisPrefixDefaultsToFxAndBothBinariesReadIt(t *testing.T) {
	for _, tc := range []struct {
		set, want, lease string
	}{
		{"", "fx", "engine:lease:forex-trading"},
		{"  ", "fx", "engine:lease:forex-trading"},
		{"staging", "staging", "staging:engine:lease:forex-trading"},
	} {
		for _, p := range []Process{Web, Cron} {
			c, err := Load(p, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_REDIS_PREFIX": tc.set}))
			if err != nil {
				t.Fatal(err)
			}
			if c.RedisNames.Prefix() != tc.want || c.RedisNames.Ticks() != tc.want+":ticks" || c.RedisNames.EngineLease("forex-trading") != tc.lease {
				t.Errorf("%s with FXDESK_REDIS_PREFIX=%q: prefix %q, ticks %q, lease %q", p, tc.set, c.RedisNames.Prefix(), c.RedisNames.Ticks(), c.RedisNames.EngineLease("forex-trading"))
			}
			if line := c.LogValue().String(); !strings.Contains(line, "redisPrefix="+tc.want) {
				t.Errorf("startup line %q does not show the Redis prefix", line)
			}
		}
	}
}

// Standby is accepted where the web tier forwards, and shows in the startup line.
func TestStandbyTakeoverOnAForwardingTier(t *testing.T) {
	c, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_TAKEOVER": "Standby",
		"FXDESK_WEB_INSTANCES": "2", "FXDESK_CLUSTER_SECRET": strongSecret}))
	if err != nil || c.Takeover != TakeoverStandby {
		t.Fatalf("standby on a forwarding tier = %v, %v", c.Takeover, err)
	}
	if line := c.LogValue().String(); !strings.Contains(line, "takeover=standby") {
		t.Errorf("startup line %q does not show the takeover mode", line)
	}
}

// The venue: unset is a pure B-book desk; sim has defaults that need nothing else; a URL needs
// its account and token and is paced to OANDA's connection rate; each bad value is refused with
// a message naming it.
func TestVenueSettingsAreCheckedPerModeAndNamedWhenBad(t *testing.T) {
	base := map[string]string{"FXDESK_HOSTNAME": "box"}
	with := func(kv map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range kv {
			out[k] = v
		}
		return out
	}
	c, err := Load(Web, env(base))
	if err != nil || c.Venue.Enabled() {
		t.Fatalf("no FXDESK_VENUE: %+v %v", c.Venue, err)
	}
	c, err = Load(Web, env(with(map[string]string{"FXDESK_VENUE": "sim"})))
	if err != nil || c.Venue.Account != "fxdesk-sim" || c.Venue.Token != "sim-token" || c.Venue.ConnectRate != 0 ||
		c.Venue.Concurrency != 512 || c.Venue.Timeout != 10*time.Second || c.Venue.NotSentAfter != 2*time.Minute ||
		c.Venue.SimLatency != 130*time.Millisecond || c.Venue.MarginWarn.String() != "0.5" || !c.Venue.MinNAV.IsZero() {
		t.Fatalf("sim defaults: %+v %v", c.Venue, err)
	}
	c, err = Load(Web, env(with(map[string]string{"FXDESK_VENUE": "https://api-fxpractice.example/", "FXDESK_VENUE_ACCOUNT": "101-1", "FXDESK_VENUE_TOKEN": "t0ken"})))
	if err != nil || c.Venue.URL != "https://api-fxpractice.example" || c.Venue.ConnectRate != 2 {
		t.Fatalf("a venue URL: %+v %v", c.Venue, err)
	}
	// A FIX session needs its session file and no token (it authenticates at logon).
	c, err = Load(Web, env(with(map[string]string{"FXDESK_VENUE": "fix", "FXDESK_FIX_SESSION": "/etc/fxdesk/fix-session.cfg"})))
	if err != nil || !c.Venue.IsFIX() || c.Venue.FIXSession != "/etc/fxdesk/fix-session.cfg" || c.Venue.Account != "fix" || c.Venue.Token != "" {
		t.Fatalf("fix: %+v %v", c.Venue, err)
	}
	for _, tc := range []struct {
		kv   map[string]string
		want []string
	}{
		{map[string]string{"FXDESK_VENUE": "fix"}, []string{"FXDESK_FIX_SESSION", "configs/fix-session.cfg"}},
		{map[string]string{"FXDESK_VENUE": "fix", "FXDESK_FIX_SESSION": "sim", "FXDESK_WEB_INSTANCES": "2", "FXDESK_CLUSTER_SECRET": strongSecret}, []string{"FXDESK_FIX_SESSION=sim", "fxdesk-fixvenue"}},
		{map[string]string{"FXDESK_VENUE": "ftp://venue"}, []string{"FXDESK_VENUE", "sim"}},
		{map[string]string{"FXDESK_VENUE": "https://venue"}, []string{"FXDESK_VENUE_ACCOUNT", "FXDESK_VENUE_TOKEN"}},
		{map[string]string{"FXDESK_VENUE": "sim", "FXDESK_VENUE_TIMEOUT": "3m"}, []string{"FXDESK_VENUE_NOT_SENT_AFTER", "FXDESK_VENUE_TIMEOUT"}},
		{map[string]string{"FXDESK_VENUE": "sim", "FXDESK_VENUE_MARGIN_WARN": "1.5"}, []string{"FXDESK_VENUE_MARGIN_WARN", "0 to 1"}},
		{map[string]string{"FXDESK_VENUE": "sim", "FXDESK_VENUE_MIN_NAV": "-1"}, []string{"FXDESK_VENUE_MIN_NAV"}},
		{map[string]string{"FXDESK_VENUE": "sim", "FXDESK_VENUE_CONCURRENCY": "0"}, []string{"FXDESK_VENUE_CONCURRENCY"}},
		{map[string]string{"FXDESK_VENUE": "sim", "FXDESK_WEB_INSTANCES": "2", "FXDESK_CLUSTER_SECRET": strongSecret}, []string{"FXDESK_VENUE=sim", "fxdesk-venuesim"}},
	} {
		_, err := Load(Web, env(with(tc.kv)))
		if err == nil {
			t.Errorf("%v accepted", tc.kv)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not name %q", tc.kv, err, w)
			}
		}
	}
}

// Redis through Sentinels is a URL like any other: accepted, and its password a secret that the
// startup line masks.
func TestSentinelRedisURLIsAccepted(t *testing.T) {
	c, err := Load(Web, env(map[string]string{
		"FXDESK_HOSTNAME":  "box",
		"FXDESK_REDIS_URL": "redis-sentinel://:red-s3cret@s1:26379,s2:26380,s3:26381/0?master=fxdesk",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Secrets(), "red-s3cret") {
		t.Errorf("Secrets() = %q, want the Sentinel URL's password", c.Secrets())
	}
	if line := c.LogValue().String(); strings.Contains(line, "red-s3cret") || !strings.Contains(line, "s1:26379,s2:26380,s3:26381") {
		t.Errorf("startup line %s: want the Sentinels shown and the password masked", line)
	}
}

// Secrets lists every credential the process holds, each URL credential as written and decoded,
// and nothing that is not one: logging.Redact masks exactly these in every log line.
func TestSecretsListsEveryCredential(t *testing.T) {
	c, err := Load(Web, env(map[string]string{
		"FXDESK_HOSTNAME":       "box",
		"FXDESK_MYSQL_DSN":      "fx:my-s3cret@tcp(db:3306)/fxdesk",
		"FXDESK_REDIS_URL":      "redis://app:red%2Fpass@cache:6379/0",
		"FXDESK_FEED":           "wss://feed.example/forex?symbols=EURUSD&apiKey=feed%2Bkey&access_token=tok1",
		"FXDESK_FEED_KEY":       "provider-key",
		"FXDESK_VENUE":          "https://venue-user@venue.example",
		"FXDESK_VENUE_ACCOUNT":  "101-1",
		"FXDESK_VENUE_TOKEN":    "venue-tok",
		"FXDESK_WEB_INSTANCES":  "2",
		"FXDESK_CLUSTER_SECRET": "node-s3cret-0123456789-abcdefghijklmnop",
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := c.Secrets()
	slices.Sort(got)
	want := []string{"feed%2Bkey", "feed+key", "my-s3cret", "node-s3cret-0123456789-abcdefghijklmnop", "provider-key", "red%2Fpass", "red/pass", "tok1", "venue-tok", "venue-user"}
	if !slices.Equal(got, want) {
		t.Errorf("Secrets() = %q\nwant        %q", got, want)
	}
	// The startup line masks the same credentials, the query's other parameters kept.
	line := c.LogValue().String()
	for _, s := range want {
		if strings.Contains(line, s) {
			t.Errorf("startup line shows %q: %s", s, line)
		}
	}
	if !strings.Contains(line, "symbols=EURUSD") {
		t.Errorf("startup line lost the feed URL's plain parameters: %s", line)
	}
}

// A refused URL is named in the error with its credentials masked: the error is printed.
func TestRefusedURLsAreMasked(t *testing.T) {
	_, err := Load(Web, env(map[string]string{"FXDESK_HOSTNAME": "box", "FXDESK_FEED": "https://feed.example/?apiKey=k3y-in-url",
		"FXDESK_REDIS_URL": "http://:hunter2@cache", "FXDESK_VENUE": "ftp://u:venue-pw@venue", "FXDESK_VENUE_ACCOUNT": "a", "FXDESK_VENUE_TOKEN": "t"}))
	if err == nil {
		t.Fatal("bad URLs accepted")
	}
	for _, s := range []string{"k3y-in-url", "hunter2", "venue-pw"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error shows %q: %v", s, err)
		}
	}
	for _, w := range []string{"FXDESK_FEED", "FXDESK_REDIS_URL", "FXDESK_VENUE="} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not name %s: %v", w, err)
		}
	}
}
