package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"fxdesk/internal/config"
	"fxdesk/internal/feedsim"
	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// priceStream is the holder's one provider socket, and the bundled simulator behind it when
// FXDESK_FEED=sim.
type priceStream struct {
	engine *tick.Engine
	sim    *feedsim.Server
	wg     sync.WaitGroup
}

// startPriceStream starts the tick engine (and the simulator), which run until ctx ends. Call
// only on the holder.
func startPriceStream(ctx context.Context, cfg config.Config, db *sql.DB, log *slog.Logger, staleAfter func() time.Duration) (*priceStream, error) {
	loadCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	instruments, err := tick.LoadInstruments(loadCtx, db)
	if err != nil {
		return nil, err
	}
	calendars, err := tick.LoadCalendars(loadCtx, db)
	if err != nil {
		return nil, err
	}
	alwaysOpen := cfg.Calendar == "always-open"
	if alwaysOpen {
		calendars = calendars.OpenAlways()
	}
	var enabled []string
	for _, in := range instruments {
		if in.Enabled {
			enabled = append(enabled, in.Symbol)
		}
	}

	ps := &priceStream{}
	url := cfg.Feed
	if cfg.Feed == "sim" {
		ps.sim = feedsim.New(feedsim.Config{Instruments: simInstruments(instruments), Calendars: calendars, AlwaysOpen: alwaysOpen}, log.With(slog.String("part", "feedsim")))
		addr, err := ps.sim.Listen(cfg.SimAddr)
		if err != nil {
			return nil, fmt.Errorf("start the feed simulator on %s: %w", cfg.SimAddr, err)
		}
		ps.wg.Go(func() { ps.sim.Run(ctx) })
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
	ps.wg.Go(func() { ps.engine.Run(ctx) })
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

// wait blocks until the engine and the simulator have stopped (their context ended).
func (ps *priceStream) wait() { ps.wg.Wait() }
