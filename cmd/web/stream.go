package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
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

// priceStream is the holder's one provider socket, and the bundled simulator behind it when
// FXDESK_FEED=sim.
type priceStream struct {
	engine *tick.Engine
	sim    *feedsim.Server
	// digits gives an instrument's quoted decimals (-1 for a symbol with no instrument row),
	// for the quote mirror's prices.
	digits func(symbol string) int
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

// startPriceStream starts the tick engine (and the simulator) as parts of stage, which they run
// in until it stops. Call only on the holder.
func startPriceStream(ctx context.Context, stage *lifecycle.Stage, cfg config.Config, db *sql.DB, log *slog.Logger, staleAfter func() time.Duration) (*priceStream, error) {
	instruments, calendars, err := loadMarkets(ctx, cfg, db)
	if err != nil {
		return nil, err
	}
	alwaysOpen := cfg.Calendar == "always-open"
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
	url := cfg.Feed
	if cfg.Feed == "sim" {
		ps.sim = feedsim.New(feedsim.Config{Instruments: simInstruments(instruments), Calendars: calendars, AlwaysOpen: alwaysOpen}, log.With(slog.String("part", "feedsim")))
		addr, err := ps.sim.Listen(cfg.SimAddr)
		if err != nil {
			return nil, fmt.Errorf("start the feed simulator on %s: %w", cfg.SimAddr, err)
		}
		stage.Go("feed simulator", ps.sim.Run)
		url = ps.sim.URL()
		log.InfoContext(ctx, "feed simulator listening (provider protocol and loopback control API)", slog.String("addr", addr.String()), slog.String("url", url))
	}

	ps.engine = tick.New(tick.Config{
		URL:         url,
		Key:         cfg.FeedKey,
		CalendarFor: tick.CalendarLookup(instruments, calendars),
		StaleAfter:  staleAfter, // fxTradingQuoteStaleSecondsFx, a cached read
	}, log)
	if err := ps.engine.SetSource("instruments", enabled); err != nil {
		return nil, err
	}
	stage.Go("tick engine", ps.engine.Run)
	log.InfoContext(ctx, "fx tick engine started", slog.Int("symbols", len(enabled)), slog.Bool("simulator", ps.sim != nil))
	return ps, nil
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
