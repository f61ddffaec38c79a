package fixmd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Symbol forms: how the venue spells a desk symbol (EURUSD).
const (
	SymbolsPlain = "plain" // EURUSD (the bundled venue)
	SymbolsSlash = "slash" // EUR/USD
)

// Defaults of a Config.
const (
	DefaultHeartBeat    = 30 * time.Second
	DefaultLogonTimeout = 5 * time.Second
	DefaultBackoffMin   = 250 * time.Millisecond
	DefaultBackoffMax   = 10 * time.Second
)

// Config shapes one FIX market-data source.
type Config struct {
	// Name is the source's name at the desk ("lpfix"); required.
	Name string
	// Addr is the venue's host:port; required.
	Addr string
	// SenderCompID and TargetCompID are the market-data session's, as the desk names them (its
	// own first); required.
	SenderCompID, TargetCompID string
	// Username and Password go on the Logon (553, 554) when Password is set.
	Username, Password string
	// Symbols is how the venue spells symbols: SymbolsPlain (default) or SymbolsSlash.
	Symbols string
	// HeartBeat is the session's HeartBtInt (whole seconds, default DefaultHeartBeat).
	HeartBeat time.Duration
	// LogonTimeout restarts a connection attempt that has not logged on by then (default
	// DefaultLogonTimeout).
	LogonTimeout time.Duration
	// BackoffMin and BackoffMax bound the pause between connection attempts: it starts at
	// BackoffMin, doubles per failed attempt up to BackoffMax, and starts again at BackoffMin once
	// a session stayed logged on for BackoffMax.
	BackoffMin, BackoffMax time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Symbols == "" {
		c.Symbols = SymbolsPlain
	}
	if c.HeartBeat == 0 {
		c.HeartBeat = DefaultHeartBeat
	}
	if c.LogonTimeout == 0 {
		c.LogonTimeout = DefaultLogonTimeout
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	switch {
	case c.Name == "":
		return c, errors.New("fixmd: a source needs a Name")
	case c.SenderCompID == "" || c.TargetCompID == "":
		return c, fmt.Errorf("fixmd: source %q needs SenderCompID and TargetCompID (fix://host:port?sender=DESK&target=LP)", c.Name)
	case c.Symbols != SymbolsPlain && c.Symbols != SymbolsSlash:
		return c, fmt.Errorf("fixmd: source %q: symbols %q must be %s or %s", c.Name, c.Symbols, SymbolsPlain, SymbolsSlash)
	case c.HeartBeat < time.Second || c.HeartBeat%time.Second != 0:
		return c, fmt.Errorf("fixmd: source %q: heartbeat %s must be whole seconds, at least 1s", c.Name, c.HeartBeat)
	case c.LogonTimeout < 0 || c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return c, fmt.Errorf("fixmd: source %q: logon timeout %s must not be negative and back-off %s..%s must be positive and ordered",
			c.Name, c.LogonTimeout, c.BackoffMin, c.BackoffMax)
	case c.Username != "" && c.Password == "":
		return c, fmt.Errorf("fixmd: source %q: a username without a password; set both", c.Name)
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil || port == "" {
		return c, fmt.Errorf("fixmd: source %q: address %q must be host:port", c.Name, c.Addr)
	}
	return c, nil
}

// ParseURL reads a FIX market-data source from its URL, as FXDESK_PRICE_SOURCES names it:
//
//	fix://host:port?sender=DESK&target=LP[&username=U&password=P][&symbols=plain|slash][&heartbeat=30s]
//
// sender is the desk's SenderCompID, target the venue's. The bundled venue's market-data session
// is fix://ADDR?sender=FXDESK-MD&target=FXVENUE-MD.
func ParseURL(name, raw string) (Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Config{}, fmt.Errorf("fixmd: source %q: URL %q: %w", name, raw, err)
	}
	if u.Scheme != "fix" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return Config{}, fmt.Errorf("fixmd: source %q: URL %q must look like fix://host:port?sender=DESK&target=LP", name, redact(u))
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "sender", "target", "username", "password", "symbols", "heartbeat":
		default:
			return Config{}, fmt.Errorf("fixmd: source %q: unknown URL parameter %q (sender, target, username, password, symbols, heartbeat)", name, k)
		}
	}
	cfg := Config{Name: name, Addr: u.Host, SenderCompID: q.Get("sender"), TargetCompID: q.Get("target"),
		Username: q.Get("username"), Password: q.Get("password"), Symbols: q.Get("symbols")}
	if hb := q.Get("heartbeat"); hb != "" {
		if cfg.HeartBeat, err = time.ParseDuration(hb); err != nil {
			return Config{}, fmt.Errorf("fixmd: source %q: heartbeat %q: %w", name, hb, err)
		}
	}
	return cfg.withDefaults()
}

// redact is u without its password, for error texts and logs.
func redact(u *url.URL) string {
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		c := *u
		c.RawQuery = q.Encode()
		return c.String()
	}
	return u.String()
}

// venueSymbol is the desk symbol as the venue spells it.
func (c Config) venueSymbol(desk string) string {
	if c.Symbols == SymbolsSlash && len(desk) == 6 {
		return desk[:3] + "/" + desk[3:]
	}
	return desk
}

// deskSymbol is the venue's symbol as the desk spells it.
func (c Config) deskSymbol(venue string) string {
	if c.Symbols == SymbolsSlash {
		return strings.ReplaceAll(venue, "/", "")
	}
	return venue
}
