package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/fx"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/mirror"
	"fxdesk/internal/session"
	"fxdesk/internal/sim/feedsim"
	"fxdesk/internal/tick"
)

// priceStream is the holder's tick engine and its price sources, with the bundled simulators
// behind the "sim" ones.
type priceStream struct {
	engine *tick.Engine
	// sims are the in-process feed simulators by source name; controls their control API's
	// base URL, for the dealer's view.
	sims     map[string]*feedsim.Server
	controls map[string]string
	// digits gives an instrument's quoted decimals (-1 for a symbol with no instrument row),
	// for the quote mirror's prices.
	digits func(symbol string) int
	// started runs the engine in its stage (run).
	started func()
}

// loadMarkets reads the instruments and their session calendars, which the holder's engine and
// a follower's view of its prices judge states by; FXDESK_CALENDAR=always-open opens every one.
func loadMarkets(ctx context.Context, cfg config.Config, db *sql.DB) ([]fx.Instrument, *session.Registry, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	instruments, err := tick.LoadInstruments(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	calendars, err := tick.LoadCalendars(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Calendar == "always-open" {
		calendars = calendars.OpenAlways()
	}
	return instruments, calendars, nil
}

// startPriceStream builds the tick engine and starts the simulators as parts of stage, which they
// run in until it stops; run starts the engine. Call only on the holder.
func startPriceStream(ctx context.Context, stage *lifecycle.Stage, cfg config.Config, db *sql.DB, log *slog.Logger, staleAfter func() time.Duration) (*priceStream, error) {
	instruments, calendars, err := loadMarkets(ctx, cfg, db)
	if err != nil {
		return nil, err
	}
	var enabled []string
	for _, in := range instruments {
		if in.Enabled {
			enabled = append(enabled, in.Symbol)
		}
	}

	digits := make(map[string]int, len(instruments))
	for _, in := range instruments {
		digits[in.Symbol] = in.Digits
	}
	ps := &priceStream{digits: func(symbol string) int {
		if d, ok := digits[symbol]; ok {
			return d
		}
		return -1
	}}
	sources, err := ps.buildSources(stage, cfg, instruments, calendars, log)
	if err != nil {
		return nil, err
	}
	p := cfg.Prices
	ps.engine = tick.New(tick.Config{
		Sources:     sources,
		CalendarFor: tick.CalendarLookup(instruments, calendars),
		StaleAfter:  staleAfter, // fxTradingQuoteStaleSecondsFx, a cached read
		PipSize: func(symbol string) float64 {
			if d, ok := digits[symbol]; ok && d > 0 {
				return math.Pow10(-(d - 1))
			}
			return tick.DefaultPipSize(symbol)
		},
		Filter: tick.FilterConfig{FloorPips: p.FloorPips, BandPips: p.BandPips, ConfirmAfter: p.Confirm},
		Failover: tick.FailoverConfig{SilentFactor: p.SilentFactor, SilentMin: p.SilentMin, SilentMax: p.SilentMax,
			HoldDown: p.HoldDown},
	}, log)
	if err := ps.engine.SetSource("instruments", enabled); err != nil {
		return nil, err
	}
	ps.started = func() {
		stage.Go("tick engine", ps.engine.Run)
		log.InfoContext(ctx, "fx tick engine started", slog.Int("symbols", len(enabled)), slog.Int("sources", len(sources)), slog.Int("simulators", len(ps.sims)))
	}
	return ps, nil
}

// run starts the engine, once the parts that must see its first published tick (the candle
// writer) have subscribed and the dealer's pins and halts are applied.
func (ps *priceStream) run() { ps.started() }

// simMarketSeed is the market seed every in-process simulator of one desk shares, so that two
// "sim" sources quote the same market (feedsim.Config.MarketSeed) as a real primary and backup
// would. Fixed rather than random: a restarted holder's simulators continue the same market.
const simMarketSeed = 38

// buildSources makes FXDESK_PRICE_SOURCES' sources in priority order: a bundled simulator on
// its own listener for "sim" (FXDESK_SIM_ADDR for the first, the next ports after it), the
// provider websocket for ws:// and wss://, FIX market data for fix://.
func (ps *priceStream) buildSources(stage *lifecycle.Stage, cfg config.Config, instruments []fx.Instrument, calendars *session.Registry, log *slog.Logger) ([]tick.Source, error) {
	ps.sims, ps.controls = map[string]*feedsim.Server{}, map[string]string{}
	var sources []tick.Source
	simIndex := 0
	for _, src := range cfg.Prices.Sources {
		switch src.Kind {
		case config.PriceSim:
			addr, err := nthAddr(cfg.SimAddr, simIndex)
			if err != nil {
				return nil, err
			}
			simIndex++
			seed := uint64(0)
			if cfg.Prices.Sims() > 1 {
				seed = simMarketSeed
			}
			sim := feedsim.New(feedsim.Config{Instruments: simInstruments(instruments), Calendars: calendars, AlwaysOpen: cfg.Calendar == "always-open",
				MarketSeed: seed}, log.With(slog.String("part", "feedsim"), slog.String("source", src.Name)))
			bound, err := sim.Listen(addr)
			if err != nil {
				return nil, fmt.Errorf("start the feed simulator of price source %s on %s: %w", src.Name, addr, err)
			}
			stage.Go("feed simulator "+src.Name, sim.Run)
			ps.sims[src.Name] = sim
			ps.controls[src.Name] = "http://" + bound.String() + "/control"
			log.Info("feed simulator listening (provider protocol and loopback control API)", slog.String("source", src.Name), slog.String("addr", bound.String()),
				slog.String("url", sim.URL()), slog.String("control", ps.controls[src.Name]+"/state"))
			sources = append(sources, tick.NewWebsocketSource(src.Name, sim.URL(), cfg.FeedKey, tick.WebsocketOptions{}))
		case config.PriceWebsocket:
			sources = append(sources, tick.NewWebsocketSource(src.Name, src.URL, cfg.FeedKey, tick.WebsocketOptions{}))
		case config.PriceFIX:
			s, err := fixSource(src, log)
			if err != nil {
				return nil, err
			}
			sources = append(sources, s)
		default:
			return nil, fmt.Errorf("price source %s: unknown kind %q", src.Name, src.Kind)
		}
	}
	return sources, nil
}

// nthAddr is the listen address of the n-th simulator: addr itself for the first, the next
// ports after it for the others; port 0 stays 0 (each its own free port).
func nthAddr(addr string, n int) (string, error) {
	if n == 0 {
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("FXDESK_SIM_ADDR=%q: %w", addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("FXDESK_SIM_ADDR=%q: port %q is not a number", addr, port)
	}
	if p == 0 {
		return addr, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+n)), nil
}

// simInstruments gives the simulator the desk's instrument list, so both agree on symbols and
// calendars; prices and spreads come from the simulator's defaults where it knows the symbol.
func simInstruments(instruments []fx.Instrument) []feedsim.Instrument {
	defaults := map[string]feedsim.Instrument{}
	for _, in := range feedsim.DefaultInstruments() {
		defaults[in.Symbol] = in
	}
	var out []feedsim.Instrument
	for _, in := range instruments {
		if d, ok := defaults[in.Symbol]; ok {
			d.Calendar = in.SessionCalendar
			out = append(out, d)
		}
	}
	return out
}

// followPrices starts, on a follower web process of a forwarding web tier, the subscription to
// the ticks the holder publishes, and shows them through quotes: the same session calendars as
// the holder's engine decide MARKET_CLOSED, the same staleness QUOTING_HALTED.
func followPrices(ctx context.Context, stage *lifecycle.Stage, cfg config.Config, db *sql.DB, rdb redis.UniversalClient, quotes *desk.Quotes, log *slog.Logger, staleAfter func() time.Duration) error {
	instruments, calendars, err := loadMarkets(ctx, cfg, db)
	if err != nil {
		return err
	}
	f, err := mirror.NewStreamFollower(mirror.StreamFollowerConfig{Redis: rdb, Names: cfg.RedisNames, CalendarFor: tick.CalendarLookup(instruments, calendars), StaleAfter: staleAfter}, log)
	if err != nil {
		return err
	}
	stage.Go("price feed follower", f.Run)
	quotes.SetFollowed(f)
	return nil
}
