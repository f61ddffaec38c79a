package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/config"
	"fxdesk/internal/desk"
	"fxdesk/internal/execution"
	"fxdesk/internal/gate"
	hedgepkg "fxdesk/internal/hedge"
	"fxdesk/internal/hedger"
	"fxdesk/internal/lifecycle"
	"fxdesk/internal/metrics"
	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/sim/venuesim"
	"fxdesk/internal/tick"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// venueParts is the A-book (docs/architecture.md, «A-book execution and the reconciler»): the venue
// client on the executor's pre-sized workers and connections, and on FXDESK_VENUE=sim the bundled
// simulator on loopback. Built at boot when a venue is configured; the holder adds the reconciler
// and the hedge monitor.
type venueParts struct {
	cfg config.VenueConfig
	// api is the venue as the reconciler and the hedge monitor read it, send as trading and the
	// reconciler's closes send through it: the REST client on the executor, or the FIX session.
	api  venue.API
	send trading.Venue
	// fix is the FIX session (FXDESK_VENUE=fix), nil for REST; it has no executor (exec nil):
	// the session's writer is its executor.
	fix    *fix.Session
	fixSim *fixvenue.Server // FXDESK_FIX_SESSION=sim: the bundled FIX venue in this process
	// alerts is the inbox the FIX session raises a refused query in.
	alerts *alert.Inbox
	exec   *venue.Executor
	client *venue.Client
	// warmClient is client without a per-call bound, for the warm-up probes (see newVenue).
	warmClient *venue.Client
	sender     *venue.Sender
	sim        *venuesim.Server
	log        *slog.Logger
	hedge      atomic.Pointer[execution.HedgeMonitor]
	// book is the desk's hedge book (docs/routing.md, «Hedge book»): read on every process,
	// traded on the holder only (its sends pass the gate and its identity rows the fence).
	book *hedgepkg.Book
}

func newVenue(cfg config.Config, db *sql.DB, m *metrics.Metrics, quotes *desk.Quotes, g *gate.Gate, inbox *alert.Inbox, stage *lifecycle.Stage, log *slog.Logger) (*venueParts, error) {
	if !cfg.Venue.Enabled() {
		return nil, nil
	}
	vc := cfg.Venue
	vp := &venueParts{cfg: vc, log: log, alerts: inbox}
	if vc.IsFIX() {
		return vp, vp.newFIX(cfg, db, m, quotes, inbox, stage)
	}
	exec, err := venue.NewExecutor(venue.ExecutorConfig{Cap: vc.Concurrency, ConnectRate: vc.ConnectRate, Timeout: vc.Timeout, Observer: m.NewVenue(), Log: log})
	if err != nil {
		return nil, err
	}
	m.WatchVenue(exec.Stats)
	vp.exec = exec
	base := vc.URL
	if base == "sim" {
		sim, err := venuesim.New(venuesim.Config{AccountID: vc.Account, Token: vc.Token, Latency: vc.SimLatency, Prices: deskPrices{quotes}}, log.With(slog.String("part", "venuesim")))
		if err != nil {
			return nil, err
		}
		if _, err := sim.Listen(vc.SimAddr); err != nil {
			return nil, fmt.Errorf("venue simulator: %w", err)
		}
		if _, err := sim.ListenControl(vc.SimControlAddr); err != nil {
			return nil, fmt.Errorf("venue simulator control: %w", err)
		}
		stage.Go("venue simulator", sim.Run)
		vp.sim, base = sim, sim.URL()
	}
	client, err := venue.NewClient(venue.ClientConfig{BaseURL: base, AccountID: vc.Account, Token: vc.Token, HTTP: exec.HTTPClient(), Timeout: vc.Timeout})
	if err != nil {
		return nil, err
	}
	vp.client = client
	// The warm-up probe's client has no per-call bound of its own: paced to the venue's
	// connection rate, warming takes longer than one call may, and Ensure bounds it.
	if vp.warmClient, err = venue.NewClient(venue.ClientConfig{BaseURL: base, AccountID: vc.Account, Token: vc.Token,
		HTTP: exec.HTTPClient(), Timeout: 24 * time.Hour}); err != nil {
		return nil, err
	}
	vp.sender = venue.NewSender(client, exec, vc.Account, func(ctx context.Context) error {
		return g.Admit(ctx, gate.VenueSend, slog.String("op", "queued venue send"))
	})
	vp.api, vp.send = client, vp.sender
	return vp, nil
}

// newFIX builds the FIX session from its file, or with FXDESK_FIX_SESSION=sim starts the bundled
// FIX venue in-process on loopback, priced from the desk's quotes, and a session to it; the
// holder runs the session (startHolder).
func (v *venueParts) newFIX(cfg config.Config, db *sql.DB, m *metrics.Metrics, quotes *desk.Quotes, inbox *alert.Inbox, stage *lifecycle.Stage) error {
	var settings io.Reader
	if cfg.Venue.FIXSession == config.FIXSim {
		vc := cfg.Venue
		sim, err := fixvenue.New(fixvenue.Config{Latency: vc.SimLatency, Prices: deskPrices{quotes}}, v.log.With(slog.String("part", "fixvenue")))
		if err != nil {
			return err
		}
		addr, err := sim.Listen(vc.SimAddr)
		if err != nil {
			return fmt.Errorf("FIX venue simulator: %w", err)
		}
		if _, err := sim.ListenControl(vc.SimControlAddr); err != nil {
			sim.Stop()
			return fmt.Errorf("FIX venue simulator control: %w", err)
		}
		stage.Go("FIX venue simulator", sim.Run)
		v.fixSim = sim
		host, port, _ := net.SplitHostPort(addr)
		settings = strings.NewReader(fmt.Sprintf("[DEFAULT]\nConnectionType=initiator\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=%s\nTargetCompID=%s\nSocketConnectHost=%s\nSocketConnectPort=%s\n",
			fixvenue.DefaultDeskCompID, fixvenue.DefaultVenueCompID, host, port))
	} else {
		f, err := os.Open(cfg.Venue.FIXSession)
		if err != nil {
			return fmt.Errorf("FXDESK_FIX_SESSION: %w", err)
		}
		defer f.Close()
		settings = f
	}
	observer := m.NewVenue()
	s, err := fix.New(fix.Config{Settings: settings, DB: db, Account: cfg.Venue.Account, Timeout: cfg.Venue.Timeout,
		OnWrote: observer.ObserveOwnTime, FreshVenue: v.fixSim != nil, Alerts: v.alerts, Log: v.log.With(slog.String("part", "fix"))})
	if err != nil {
		return err
	}
	v.fix, v.api, v.send = s, s, fix.Sender{S: s}
	m.WatchVenue(v.Stats) // fxdesk_venue_reachable: the session logged on
	return nil
}

// runFIX keeps the FIX session logged on while this process holds the lease: it logs on when
// the holder starts and logs out when ctx ends or the lease is lost.
func (v *venueParts) runFIX(ctx context.Context, serving func() bool) error {
	_, err := v.fix.RunWhile(ctx, serving, 250*time.Millisecond)
	return err
}

// probe is the cheapest call that proves the venue answers: the account summary.
func (v *venueParts) probe(ctx context.Context) error {
	_, err := v.client.Summary(ctx)
	return err
}

// Last and Stats are the dealer's view of the venue (api.VenueView).
func (v *venueParts) Last() *execution.VenueBook {
	if h := v.hedge.Load(); h != nil {
		return h.Last()
	}
	return nil
}

func (v *venueParts) Stats() venue.ExecutorStats {
	if v.exec == nil {
		// FIX: one session, no workers or pooled connections.
		return venue.ExecutorStats{Reachable: v.fix.Reachable(), Connections: 1}
	}
	return v.exec.Stats()
}

// Active is true once the holder's venue jobs exist here.
func (v *venueParts) Active() bool { return v.hedge.Load() != nil }

// workers is how many risk engine workers the holder needs so that a gap's burst of venue
// closes is limited by the executor, not by the risk engine. A worker holds its close through
// the venue's answer and then through its booking (a group commit), while the executor's slot
// is free again at the answer: with only as many workers as slots, every slot waits for a
// booking before its next call, the burst goes in waves of venue latency plus commit, and the
// calls past the cap wait in the risk engine's queue, where the executor's queue metrics
// cannot see them. Twice the cap keeps a call waiting for every slot while the previous
// answers are booked.
func (v *venueParts) workers(atLeast int) int {
	if v == nil {
		return atLeast
	}
	if v.exec == nil {
		// FIX: a close holds its worker until its report; the session writes them all at once.
		return max(atLeast, v.cfg.Concurrency)
	}
	return max(atLeast, 2*v.exec.Cap())
}

// startHolder adds what only the holder runs: the executor sized from the worst case (every open
// EXTERNAL position closed by one gap) and warmed, the probe that notices the venue is back, and
// the two venue jobs — at once (first: boot, or lease_restored after a takeover), after every
// gap, and every interval, one run at a time. Call it before the risk engine starts.
func (v *venueParts) startHolder(ctx context.Context, h *holderParts, first string) error {
	rec, err := execution.NewReconciler(execution.ReconcilerConfig{Venue: v.api, Closer: v.send, Desk: h.trading.ABook(), Hedge: v.book, Gate: h.gate, Alerts: h.inbox,
		Account: v.cfg.Account, Plan: execution.Config{NotSentAfter: v.cfg.NotSentAfter}, Log: h.base.With(slog.String("component", "FX"), slog.String("job", "runFxExecutionReconciler"))})
	if err != nil {
		return err
	}
	hedge, err := execution.NewHedgeMonitor(execution.HedgeConfig{Venue: v.api, Desk: h.trading.ABook(), Hedge: v.book, Gate: h.gate, Alerts: h.inbox,
		MarginWarn: v.cfg.MarginWarn, MinNAV: v.cfg.MinNAV, Log: h.base.With(slog.String("component", "FX"), slog.String("job", "runFxHedgeMonitor"))})
	if err != nil {
		return err
	}
	v.hedge.Store(hedge)
	// HEDGE n% routing: swept at once, on every position opened, reduced or closed, and every few
	// seconds for what a sweep could not finish (the venue down, a close not confirmed).
	rules, err := hedgepkg.NewRules(v.book, min(h.cfg.VenueInterval, 5*time.Second), nil, h.base.With(slog.String("component", "FX"), slog.String("part", "hedge rules")))
	if err != nil {
		return err
	}
	h.relay.hedge.Store(rules)
	h.guarded.Go("hedge rules", rules.Run)
	// The hedger (docs/routing.md, «The hedger»): on every position change, and every
	// FXDESK_HEDGE_INTERVAL, it keeps each limited symbol's net exposure inside its limit.
	orders, net := h.metrics.NewHedger()
	runner, err := hedger.New(hedger.Config{Book: hedger.HedgeBook{Book: v.book}, Desk: h.trading.ABook(), Terms: h.settings.HedgeTerms,
		Gate: h.gate, Alerts: h.inbox, Every: h.cfg.HedgeInterval, Orders: orders, Net: net,
		Quoting: func(symbol string) bool { return h.quotes.SymbolState(symbol) == tick.Quoting },
		Log:     h.base.With(slog.String("component", "FX"), slog.String("part", "hedger"))})
	if err != nil {
		return err
	}
	h.relay.hedger.Store(runner)
	h.guarded.Go("hedger", runner.Run)

	if v.fix != nil {
		h.guarded.Go("FIX session", func(ctx context.Context) error { return v.runFIX(ctx, h.keeper.Serving) })
		jobs := &execution.Jobs{Reconciler: rec, Hedge: hedge, Every: h.cfg.VenueInterval, First: first, Restored: h.desk.VenueRestored(),
			Log: h.base.With(slog.String("component", "FX"))}
		h.guarded.Go("venue jobs", func(ctx context.Context) error {
			// The first run needs the session: the reconciler asks the venue.
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := v.fix.WaitLoggedOn(wctx); err != nil && ctx.Err() == nil {
				v.log.Warn("FIX session not logged on after 30s; the venue jobs run and fail until it is", slog.Any("err", err))
			}
			return jobs.Run(ctx)
		})
		return nil
	}
	sizing := &execution.Sizing{Executor: v.exec, Desk: h.trading.ABook(), Paced: v.cfg.ConnectRate > 0, Log: v.log,
		Warm: func(ctx context.Context) error { _, err := v.warmClient.Summary(ctx); return err }}
	if !sizing.Paced {
		sizing.Resize(ctx) // before the risk engine can trigger a close
	}
	h.guarded.Go("venue probe", func(ctx context.Context) error { return v.exec.Probe(ctx, time.Second, v.probe) })
	jobs := &execution.Jobs{Reconciler: rec, Hedge: hedge, Every: h.cfg.VenueInterval, First: first, Restored: h.desk.VenueRestored(),
		Sizing: sizing, Log: h.base.With(slog.String("component", "FX"))}
	h.guarded.Go("venue jobs", jobs.Run)
	return nil
}

// deskPrices prices the in-process venue simulator from the desk's own quotes (the holder's tick
// engine), so the venue fills where the desk's traders see the market.
type deskPrices struct{ q *desk.Quotes }

func (p deskPrices) Quote(symbol string) (bid, ask decimal.Decimal, ok bool) {
	q, found := p.q.LastTick(symbol)
	if !found || p.q.SymbolState(symbol) != tick.Quoting {
		return decimal.Zero, decimal.Zero, false
	}
	return decimal.NewFromFloat(q.Bid), decimal.NewFromFloat(q.Ask), true
}
