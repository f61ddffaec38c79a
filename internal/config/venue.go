package config

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// VenueConfig is the execution venue (A-book; docs/architecture.md, «A-book execution and the
// reconciler»). URL "" means none: a pure B-book desk, which runs no venue jobs.
type VenueConfig struct {
	// URL is FXDESK_VENUE: sim (the bundled venue simulator, in-process on loopback), an
	// http(s) base URL of an OANDA v20 REST API, fix (a FIX 4.4 session, FIXSession), or "" for
	// none.
	URL string
	// FIXSession is FXDESK_FIX_SESSION, the QuickFIX session file of FXDESK_VENUE=fix
	// (configs/fix-session.cfg; docs/fix.md), or FIXSim.
	FIXSession string
	Account    string // FXDESK_VENUE_ACCOUNT, default fxdesk-sim with sim
	Token      string // FXDESK_VENUE_TOKEN (masked in logs), default sim-token with sim
	// SimAddr is FXDESK_VENUE_SIM_ADDR, where the in-process simulator listens (default
	// 127.0.0.1:0); its control API listens on FXDESK_VENUE_SIM_CONTROL_ADDR.
	SimAddr, SimControlAddr string
	SimLatency              time.Duration // FXDESK_VENUE_SIM_LATENCY, default 130ms
	// Concurrency is FXDESK_VENUE_CONCURRENCY, the most venue calls in flight (workers and
	// connections), default 512; the executor sizes itself to the worst case below it.
	Concurrency int
	// ConnectRate is FXDESK_VENUE_CONNECT_RATE, new connections per second the venue accepts:
	// default 2 for a URL (OANDA's limit), unpaced for sim.
	ConnectRate  float64
	Timeout      time.Duration // FXDESK_VENUE_TIMEOUT, one call's bound, default 10s
	NotSentAfter time.Duration // FXDESK_VENUE_NOT_SENT_AFTER, default 2m
	// MarginWarn is FXDESK_VENUE_MARGIN_WARN, the venue margin closeout level (0..1) that raises
	// venue-margin-low, default 0.5; MinNAV is FXDESK_VENUE_MIN_NAV (0: off).
	MarginWarn, MinNAV decimal.Decimal
}

// Enabled is true when a venue is configured.
func (v VenueConfig) Enabled() bool { return v.URL != "" }

// IsFIX is true for FXDESK_VENUE=fix.
func (v VenueConfig) IsFIX() bool { return v.URL == "fix" }

// FIXSim is FXDESK_FIX_SESSION's value that starts the bundled FIX venue in-process on loopback
// and connects the desk's session to it (single-process installs and demos).
const FIXSim = "sim"

// InProcessSim is true when the venue is a simulator inside this process (FXDESK_VENUE=sim, or
// fix with FXDESK_FIX_SESSION=sim): its state lives and dies with the process.
func (v VenueConfig) InProcessSim() bool {
	return v.URL == "sim" || v.IsFIX() && v.FIXSession == FIXSim
}

func loadVenue(env func(key, def string) string, duration func(key, def string) time.Duration) (VenueConfig, []error) {
	var errs []error
	v := VenueConfig{URL: strings.TrimRight(env("FXDESK_VENUE", ""), "/")}
	if !v.Enabled() {
		return v, errs
	}
	sim := v.URL == "sim"
	defAccount, defToken, defRate := "", "", "2"
	switch {
	case sim:
		defAccount, defToken, defRate = "fxdesk-sim", "sim-token", "0"
	case v.IsFIX():
		// A FIX session authenticates at logon (the session file), not with a token.
		defAccount, defRate = "fix", "0"
		v.FIXSession = env("FXDESK_FIX_SESSION", "")
		if v.FIXSession == "" {
			errs = append(errs, errors.New("FXDESK_VENUE=fix needs FXDESK_FIX_SESSION, the path of its QuickFIX session file (see configs/fix-session.cfg)"))
		}
	default:
		if u, err := url.Parse(v.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("FXDESK_VENUE=%q must be sim, fix, an http(s) base URL of the venue's REST API, or unset for a pure B-book desk", maskURL(v.URL)))
		}
	}
	v.Account = env("FXDESK_VENUE_ACCOUNT", defAccount)
	v.Token = env("FXDESK_VENUE_TOKEN", defToken)
	if v.Account == "" || (v.Token == "" && !v.IsFIX()) {
		errs = append(errs, errors.New("FXDESK_VENUE_ACCOUNT and FXDESK_VENUE_TOKEN must be set with a venue URL"))
	}
	v.SimAddr = env("FXDESK_VENUE_SIM_ADDR", "127.0.0.1:0")
	v.SimControlAddr = env("FXDESK_VENUE_SIM_CONTROL_ADDR", "127.0.0.1:0")
	v.SimLatency = duration("FXDESK_VENUE_SIM_LATENCY", "130ms")
	v.Timeout = duration("FXDESK_VENUE_TIMEOUT", "10s")
	v.NotSentAfter = duration("FXDESK_VENUE_NOT_SENT_AFTER", "2m")
	n, err := strconv.Atoi(env("FXDESK_VENUE_CONCURRENCY", "512"))
	if err != nil || n < 1 || n > 10000 {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_CONCURRENCY=%q must be a whole number from 1 to 10000", env("FXDESK_VENUE_CONCURRENCY", "")))
	}
	v.Concurrency = n
	rate, err := strconv.ParseFloat(env("FXDESK_VENUE_CONNECT_RATE", defRate), 64)
	if err != nil || rate < 0 {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_CONNECT_RATE=%q must be a number of connections per second, 0 for unpaced", env("FXDESK_VENUE_CONNECT_RATE", "")))
	}
	v.ConnectRate = rate
	if v.Timeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_TIMEOUT=%s must be at least 100ms", v.Timeout))
	}
	if v.NotSentAfter < v.Timeout {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_NOT_SENT_AFTER=%s must be at least FXDESK_VENUE_TIMEOUT (%s): an order still in flight must not be marked not sent", v.NotSentAfter, v.Timeout))
	}
	if v.SimLatency < 0 {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_SIM_LATENCY=%s must not be negative", v.SimLatency))
	}
	raw := env("FXDESK_VENUE_MARGIN_WARN", "0.5")
	if d, err := decimal.NewFromString(raw); err != nil || d.IsNegative() || d.GreaterThan(decimal.NewFromInt(1)) {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_MARGIN_WARN=%q must be a margin closeout level from 0 to 1 (the venue closes out at 1)", raw))
	} else {
		v.MarginWarn = d
	}
	raw = env("FXDESK_VENUE_MIN_NAV", "0")
	if d, err := decimal.NewFromString(raw); err != nil || d.IsNegative() {
		errs = append(errs, fmt.Errorf("FXDESK_VENUE_MIN_NAV=%q must be an amount, 0 for off", raw))
	} else {
		v.MinNAV = d
	}
	return v, errs
}
