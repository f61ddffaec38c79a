package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/catalog"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/eod"
	"fxdesk/internal/gate"
	"fxdesk/internal/lease"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/metrics"
	"fxdesk/internal/mirror"
	"fxdesk/internal/pricesource"
	"fxdesk/internal/relay"
	"fxdesk/internal/risk"
	"fxdesk/internal/schedule"
	"fxdesk/internal/trading"
)

// holderParts is what only the lease holder runs: the price stream, the quote mirror publisher
// (CRON_MODE=off), the tick publisher for follower web processes (forwarding on), the inline
// scheduler (CRON_MODE=inline), the venue jobs and the risk engine. start runs them in the
// process's stages — the same ordered shutdown and release whether they started at boot or
// when a standby follower took the lease over later.
type holderParts struct {
	cfg      config.Config
	db       *sql.DB
	rdb      redis.UniversalClient
	keeper   *lease.Keeper
	gate     *gate.Gate
	desk     *desk.Desk
	quotes   *desk.Quotes
	settings *catalog.Settings
	trading  *trading.Service
	catalog  *catalog.Cache // the trading rules' catalog: the terms follower re-reads it
	notices  *termsNotices
	relay    *riskRelay
	inbox    *alert.Inbox
	pins     *pricesource.Pins
	metrics  *metrics.Metrics
	venue    *venueParts // nil without an execution venue
	base     *slog.Logger

	guarded, stream *lifecycle.Stage

	once    sync.Once
	risk    atomic.Pointer[risk.Engine]
	sched   atomic.Pointer[schedule.Scheduler]
	started error
}

// start builds and starts the holder's parts once; firstSweep is the risk engine's first sweep
// reason (boot, or lease_restored after a takeover). A second call returns the first's result.
func (h *holderParts) start(ctx context.Context, firstSweep string) error {
	h.once.Do(func() { h.started = h.startOnce(ctx, firstSweep) })
	return h.started
}

func (h *holderParts) startOnce(ctx context.Context, firstSweep string) error {
	log := h.base.With(slog.String("component", "FX"))
	stream, err := startPriceStream(ctx, h.stream, h.cfg, h.db, log, h.settings.StaleAfter)
	if err != nil {
		return fmt.Errorf("start the price stream: %w", err)
	}
	h.quotes.SetEngine(stream.engine)
	h.metrics.WatchEngine(stream.engine)
	// The dealer's pins and halts outlive the holder that took them: applied before anything
	// acts on a price from this engine.
	if err := h.pins.SetEngine(ctx, stream.engine, stream.controls); err != nil {
		return err
	}
	// The candle writer subscribes before the engine runs: every published tick is in a candle
	// (the soak saw a new holder's first ticks missing from theirs).
	candleParts, err := h.newCandles(stream, log)
	if err != nil {
		return fmt.Errorf("candles: %w", err)
	}
	stream.run()
	// The sources connect one after another at a start; a better source's first quote is taken
	// at once, so a symbol on a backup after startGrace is a failover.
	const startGrace = 5 * time.Second
	watcher := pricesource.NewWatcher(pricesource.WatcherConfig{Engine: stream.engine, Alerts: h.inbox, Log: log, Grace: startGrace,
		ResolveAfter: h.cfg.Prices.AlertResolve})
	h.stream.Go("price source watcher", watcher.Run)
	// The publisher is armed here, next to the lease, and only by CRON_MODE=off: that is the
	// one configuration in which a follower (fxdesk-cron) can exist to read it.
	if h.cfg.CronMode == config.CronOff {
		pub, err := mirror.NewSnapshotPublisher(mirror.SnapshotPublisherConfig{
			Redis: h.rdb, Names: h.cfg.RedisNames, Quotes: stream.engine, Gate: h.gate, Interval: h.cfg.MirrorInterval,
			SetPinned: func(legs []string) error { return stream.engine.SetSource("pinned", legs) },
			Exposed:   h.relay.exposedSymbols(h.db),
			Digits:    stream.digits,
			Term:      h.keeper.Term, // read on every publish; State would wait behind a renew
		}, log)
		if err != nil {
			return err
		}
		h.stream.Go("quote mirror publisher", pub.Run)
		h.desk.SetMirror(pub.Status)
		h.metrics.WatchMirror(pub.Status)
	}
	// Every accepted tick goes to Redis for the follower web processes, which exist only where
	// the web tier forwards.
	if h.cfg.Forward {
		ticks, err := mirror.NewStreamPublisher(mirror.StreamPublisherConfig{
			Redis: h.rdb, Names: h.cfg.RedisNames, Quotes: stream.engine, Gate: h.gate, Term: h.keeper.Term, Digits: stream.digits,
		}, log)
		if err != nil {
			return err
		}
		h.stream.Go("price feed publisher", ticks.Run)
	}

	// CRON_MODE=inline: the scheduled jobs run here, on the holder only (see inlineScheduler).
	tag := h.cfg.Hostname + ":" + strconv.Itoa(os.Getpid())
	var sched *schedule.Scheduler
	if h.cfg.CronMode == config.CronInline {
		if sched, err = inlineScheduler(h.db, h.quotes, stream.engine, h.inbox, h.metrics, tag, h.base.With(slog.String("component", "CRON"))); err != nil {
			return fmt.Errorf("scheduled jobs: %w", err)
		}
	}
	riskEngine, err := newHolderRisk(h.db, h.trading, stream, h.desk, h.gate, h.inbox, h.metrics, h.relay, h.base, firstSweep, h.venue.workers(book.MaxWaiting))
	if riskEngine != nil {
		riskEngine.trailFlush = h.cfg.TrailFlush
	}
	if err != nil {
		return fmt.Errorf("risk engine: %w", err)
	}
	h.risk.Store(riskEngine.engine)
	h.metrics.WatchRisk(riskEngine.engine.Stats)

	// Guarded work stops before the stream and the keeper, and the lease is released after them.
	// A pure B-book desk has no venue jobs at all.
	if h.venue != nil {
		if err := h.venue.startHolder(ctx, h, firstSweep); err != nil {
			return fmt.Errorf("venue: %w", err)
		}
	}
	h.guarded.Go("risk engine", riskEngine.run)
	// Every admin change of how accounts are marked, made here or on any other process, reaches
	// the engine through the audit log (catalog.TermsFollower).
	terms, err := catalog.NewTermsFollower(catalog.TermsFollowerConfig{DB: h.db, Cache: h.catalog, Apply: h.relay.apply, Log: log})
	if err != nil {
		return fmt.Errorf("terms follower: %w", err)
	}
	h.notices.follower.Store(terms)
	h.guarded.Go("terms follower", terms.Run)
	h.guarded.Go("terms notices", func(ctx context.Context) error { return h.notices.listen(ctx, terms) })
	if err := h.startRelay(log); err != nil {
		return err
	}
	if err := h.startRetention(candleParts.archive, log); err != nil {
		return err
	}
	// The closing prices of every rollover, from this engine: a day is frozen at its own prices
	// even when the cron process was down at its rollover (docs/eod.md).
	closes := &eod.Recorder{DB: h.db, Prices: h.quotes, By: tag, Log: log}
	h.guarded.Go("closing prices", closes.Run)
	candleParts.start()
	if sched != nil {
		h.sched.Store(sched)
		h.guarded.Go("scheduler", sched.Run)
	}
	return nil
}

// startRelay starts the host platform's feed (docs/events.md): the events outbox relayed to the
// Redis Stream and to the enabled webhooks. Both pass the gate on every batch and move their
// cursors in fenced transactions, so they run here, on the holder, and nowhere else.
func (h *holderParts) startRelay(log *slog.Logger) error {
	ev := h.cfg.Events
	stream, err := relay.NewStream(relay.StreamConfig{DB: h.db, Redis: h.rdb, Names: h.cfg.RedisNames, Gate: h.gate, Lease: h.keeper,
		Interval: ev.RelayInterval, Batch: ev.RelayBatch, MaxLen: ev.StreamMaxLen, Replicas: ev.StreamReplicas, Log: log})
	if err != nil {
		return err
	}
	hooks, err := relay.NewWebhooks(relay.WebhooksConfig{DB: h.db, Gate: h.gate, Lease: h.keeper, Interval: ev.RelayInterval,
		Sender: webhookSender(h.cfg), Failures: h.metrics.NewWebhookFailures(), Log: log})
	if err != nil {
		return err
	}
	h.guarded.Go("events relay", stream.Run)
	h.guarded.Go("webhook relay", hooks.Run)
	return nil
}

// webhookSender is how webhooks are posted, by the relay and by an admin's replay.
func webhookSender(cfg config.Config) relay.Sender {
	ev := cfg.Events
	return relay.Sender{Timeout: ev.WebhookTimeout, Attempts: ev.WebhookAttempts, Backoff: ev.WebhookBackoff, BackoffMax: ev.WebhookBackoffMax}
}

// riskStats reports the risk engine's counters once it runs here.
func (h *holderParts) riskStats() (risk.Stats, bool) {
	if e := h.risk.Load(); e != nil {
		return e.Stats(), true
	}
	return risk.Stats{}, false
}

// jobs reports the inline scheduler's jobs once it runs here; nil before, and on a follower.
func (h *holderParts) jobs() []schedule.JobState {
	if s := h.sched.Load(); s != nil {
		return s.States()
	}
	return nil
}
