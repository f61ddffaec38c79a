package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"fxdesk/internal/fixmd"
)

// PriceSourceKind is how a price source connects.
type PriceSourceKind string

const (
	// PriceSim is a bundled feed simulator started in-process on loopback (FXDESK_SIM_ADDR).
	PriceSim PriceSourceKind = "sim"
	// PriceWebsocket is a provider websocket (ws:// or wss://), the protocol of FXDESK_FEED.
	PriceWebsocket PriceSourceKind = "ws"
	// PriceFIX is FIX 4.4 market data from an LP session: fix://host:port?sender=DESK&target=LP.
	PriceFIX PriceSourceKind = "fix"
)

// PriceSource is one entry of FXDESK_PRICE_SOURCES.
type PriceSource struct {
	Name string // unique per desk: what quotes, alerts and the admin API call it
	Kind PriceSourceKind
	URL  string // "" for sim
	// FIX sessions' identities, from the URL's sender= and target= (PriceFIX only).
	SenderCompID, TargetCompID string
}

// PricesConfig is where the desk takes prices from and how it trusts them (docs/configuration.md,
// "Price sources"; docs/architecture.md; the engine's tick.FilterConfig and tick.FailoverConfig).
type PricesConfig struct {
	// Sources is FXDESK_PRICE_SOURCES in priority order, the first the primary. Unset, it is one
	// source "primary" from FXDESK_FEED: the desk of before several sources.
	Sources []PriceSource
	// FloorPips is FXDESK_PRICE_FLOOR_PIPS (default 30): a move of at most this many pips is
	// never held as a spike.
	FloorPips float64
	// BandPips is FXDESK_PRICE_BAND_PIPS (default 30): how far a source's mid may stand from the
	// other healthy sources' before it disagrees (unhealthy, and its ticks held).
	BandPips float64
	// Confirm is FXDESK_PRICE_CONFIRM (default 1s): a held tick that nothing contradicted for
	// this long is published, so a real gap passes after at most this delay.
	Confirm time.Duration
	// HoldDown is FXDESK_PRICE_HOLD_DOWN (default 10s): how long a better source must stay
	// healthy before a symbol fails back to it.
	HoldDown time.Duration
	// SilentFactor, SilentMin and SilentMax are FXDESK_PRICE_SILENT_FACTOR/MIN/MAX (10, 1s,
	// 10s): a source silent on a symbol for factor × its usual interval, within [min, max], is
	// unhealthy for it.
	SilentFactor         float64
	SilentMin, SilentMax time.Duration
}

// Sims counts the bundled simulator sources.
func (p PricesConfig) Sims() int {
	n := 0
	for _, s := range p.Sources {
		if s.Kind == PriceSim {
			n++
		}
	}
	return n
}

var sourceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// maxPriceSources bounds the list: each source is a connection and a column of health per symbol.
const maxPriceSources = 8

func loadPrices(getenv func(string) string, env func(key, def string) string, duration func(key, def string) time.Duration, feed string) (PricesConfig, []error) {
	var errs []error
	p := PricesConfig{
		Confirm:   duration("FXDESK_PRICE_CONFIRM", "1s"),
		HoldDown:  duration("FXDESK_PRICE_HOLD_DOWN", "10s"),
		SilentMin: duration("FXDESK_PRICE_SILENT_MIN", "1s"),
		SilentMax: duration("FXDESK_PRICE_SILENT_MAX", "10s"),
	}
	number := func(key, def string, lo, hi float64) float64 {
		raw := env(key, def)
		v, err := strconv.ParseFloat(raw, 64)
		if err != nil || !(v >= lo && v <= hi) {
			errs = append(errs, fmt.Errorf("%s=%q must be a number from %g to %g", key, raw, lo, hi))
		}
		return v
	}
	p.FloorPips = number("FXDESK_PRICE_FLOOR_PIPS", "30", 1, 10000)
	p.BandPips = number("FXDESK_PRICE_BAND_PIPS", "30", 1, 10000)
	p.SilentFactor = number("FXDESK_PRICE_SILENT_FACTOR", "10", 2, 1000)
	if p.Confirm < 10*time.Millisecond || p.Confirm > time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_PRICE_CONFIRM=%s must be from 10ms to 1m: it is how long a real gap waits before it is published", p.Confirm))
	}
	if p.HoldDown < 0 || p.HoldDown > time.Hour {
		errs = append(errs, fmt.Errorf("FXDESK_PRICE_HOLD_DOWN=%s must be from 0s to 1h", p.HoldDown))
	}
	if p.SilentMin < 50*time.Millisecond {
		errs = append(errs, fmt.Errorf("FXDESK_PRICE_SILENT_MIN=%s must be at least 50ms", p.SilentMin))
	}
	if p.SilentMax < p.SilentMin || p.SilentMax > 10*time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_PRICE_SILENT_MAX=%s must be from FXDESK_PRICE_SILENT_MIN (%s) to 10m", p.SilentMax, p.SilentMin))
	}

	raw := strings.TrimSpace(getenv("FXDESK_PRICE_SOURCES"))
	if raw == "" {
		kind, u := PriceWebsocket, feed
		if feed == "sim" {
			kind, u = PriceSim, ""
		}
		p.Sources = []PriceSource{{Name: "primary", Kind: kind, URL: u}}
		return p, errs
	}
	if f := strings.TrimSpace(getenv("FXDESK_FEED")); f != "" && f != "sim" {
		errs = append(errs, fmt.Errorf("FXDESK_FEED=%q and FXDESK_PRICE_SOURCES are both set: FXDESK_PRICE_SOURCES replaces FXDESK_FEED, so put the provider in it (primary=%s,…) and unset FXDESK_FEED", maskURL(f), maskURL(f)))
	}
	seen := map[string]bool{}
	for i, entry := range strings.Split(raw, ",") {
		entry = strings.TrimSpace(entry)
		name, target, ok := strings.Cut(entry, "=")
		name, target = strings.TrimSpace(name), strings.TrimSpace(target)
		switch {
		case !ok || target == "":
			errs = append(errs, fmt.Errorf("FXDESK_PRICE_SOURCES entry %d %q must be name=sim, name=ws://host:port/path or name=fix://host:port?sender=DESK&target=LP (example: primary=sim,backup=sim)", i+1, maskURL(entry)))
			continue
		case !sourceName.MatchString(name):
			errs = append(errs, fmt.Errorf("FXDESK_PRICE_SOURCES entry %d: name %q must be 1 to 32 lower-case letters, digits or '-', starting with a letter", i+1, name))
			continue
		case seen[name]:
			errs = append(errs, fmt.Errorf("FXDESK_PRICE_SOURCES: the name %q is used twice; each source needs its own", name))
			continue
		}
		seen[name] = true
		src, err := parsePriceSource(name, target)
		if err != nil {
			errs = append(errs, fmt.Errorf("FXDESK_PRICE_SOURCES entry %d (%s): %w", i+1, name, err))
			continue
		}
		p.Sources = append(p.Sources, src)
	}
	if len(seen) > maxPriceSources {
		errs = append(errs, fmt.Errorf("FXDESK_PRICE_SOURCES lists %d sources; at most %d", len(seen), maxPriceSources))
	}
	return p, errs
}

func parsePriceSource(name, target string) (PriceSource, error) {
	if target == "sim" {
		return PriceSource{Name: name, Kind: PriceSim}, nil
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return PriceSource{}, fmt.Errorf("%q must be sim, a ws:// or wss:// provider URL, or fix://host:port?sender=DESK&target=LP", maskURL(target))
	}
	switch u.Scheme {
	case "ws", "wss":
		return PriceSource{Name: name, Kind: PriceWebsocket, URL: target}, nil
	case "fix":
		q := u.Query()
		sender, tgt := q.Get("sender"), q.Get("target")
		if u.Port() == "" || sender == "" || tgt == "" {
			return PriceSource{}, fmt.Errorf("%q must be fix://host:port?sender=DESK&target=LP: the port and both CompIDs of the market data session are required", maskURL(target))
		}
		// The rest (username, password, symbols, heartbeat) is the FIX source's to read.
		if _, err := fixmd.ParseURL(name, target); err != nil {
			return PriceSource{}, err
		}
		return PriceSource{Name: name, Kind: PriceFIX, URL: target, SenderCompID: sender, TargetCompID: tgt}, nil
	default:
		return PriceSource{}, fmt.Errorf("%q has scheme %q: use sim, ws://, wss:// or fix://", maskURL(target), u.Scheme)
	}
}

// priceSourcesLog shows the sources as name=URL with credentials masked, for the startup line.
func priceSourcesLog(sources []PriceSource) string {
	parts := make([]string, len(sources))
	for i, s := range sources {
		if s.Kind == PriceSim {
			parts[i] = s.Name + "=sim"
		} else {
			parts[i] = s.Name + "=" + maskURL(s.URL)
		}
	}
	return strings.Join(parts, ",")
}
