package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/desk"
	"fxdesk/internal/gate"
	"fxdesk/internal/hedge"
	"fxdesk/internal/hedger"
	"fxdesk/internal/metrics"
	"fxdesk/internal/risk"
	"fxdesk/internal/trading"
)

// balanceRefresh is how often the holder's risk view re-reads balances that other processes
// (fxdesk-cron's swaps, the inline scheduler) changed; see trading.RiskDesk.FollowBalances.
const balanceRefresh = 30 * time.Second

// riskRelay hands the trading service's committed changes to the risk engine once there is
// one. The service exists before the engine (the engine's executor is the service), and on a
// follower there is never an engine: then changes go nowhere.
type riskRelay struct {
	engine atomic.Pointer[risk.Engine]
	// hedge, on the holder of a desk with a venue, opens, reduces and closes HEDGE n% shares: a
	// position opened, reduced or closed asks it for a sweep (off the committer's path: Kick
	// never blocks).
	hedge atomic.Pointer[hedge.Rules]
	// hedger, on the same holder, keeps net exposure inside its limits: every position opened,
	// reduced or closed wakes it (Notify never blocks either).
	hedger atomic.Pointer[hedger.Runner]
}

// Watching is the gate's Watch and /readyz's: true once this process's risk engine exists and
// has loaded its view and swept it. Before the holder's parts start (a follower, a standby
// before its takeover, a holder between winning the claim and building the engine) there is no
// engine, so nothing is watched yet; the gate asks the lease first, so only a holder is refused
// for it.
func (r *riskRelay) Watching() bool {
	e := r.engine.Load()
	return e != nil && e.Watching()
}

func (r *riskRelay) apply(ctx context.Context, changes ...risk.Change) {
	if e := r.engine.Load(); e != nil {
		e.Apply(ctx, changes...)
	}
	if h := r.hedge.Load(); h != nil {
		for _, c := range changes {
			if c.Kind == risk.PositionOpened || c.Kind == risk.PositionReduced || c.Kind == risk.PositionClosed {
				h.Kick()
				break
			}
		}
	}
	if h := r.hedger.Load(); h != nil {
		for _, c := range changes {
			if c.Kind == risk.PositionOpened || c.Kind == risk.PositionReduced || c.Kind == risk.PositionClosed {
				h.Notify()
				break
			}
		}
	}
}

// exposedSymbols is the quote mirror's list of symbols to keep first: the risk engine's, from
// memory, once its view is loaded; the database's until then (or where there is no engine).
func (r *riskRelay) exposedSymbols(db *sql.DB) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		if e := r.engine.Load(); e != nil {
			if symbols, ok := e.ExposedSymbols(); ok {
				return symbols, nil
			}
		}
		return book.ExposedSymbols(ctx, db)
	}
}

// holderRisk is the holder's risk engine and the balance refresh beside it.
type holderRisk struct {
	engine   *risk.Engine
	desk     *trading.RiskDesk
	restored <-chan struct{} // desk.RiskRestored
	// trailFlush is how often moved trailing-stop levels are stored (FXDESK_TRAIL_FLUSH).
	trailFlush time.Duration
}

// newHolderRisk builds the risk engine over the holder's price stream; its first sweep carries
// firstSweep. Run it in the guarded work group: it must stop before the lease is released.
func newHolderRisk(db *sql.DB, svc *trading.Service, stream *priceStream, dk *desk.Desk, g *gate.Gate, inbox *alert.Inbox, m *metrics.Metrics,
	relay *riskRelay, base *slog.Logger, firstSweep string, workers int) (*holderRisk, error) {
	rd := trading.NewRiskDesk(svc, func(reason, result string) { m.Closes.WithLabelValues(reason, result).Inc() })
	updates, _ := stream.engine.Updates(nil) // closed with the tick engine's subscribers when the stream stops
	engine, err := risk.New(risk.Config{
		Loader:   rd,
		Prices:   stream.engine,
		Updates:  updates,
		Executor: rd,
		Gate:     g,
		Alerts:   marginCalls{inbox: inbox, desk: rd},
		// Each close or fill waits for its group commit without holding a connection; a batch
		// carries up to book.MaxBatch of them, so that many can wait for the next one. With a
		// venue, an EXTERNAL close waits for the venue's answer first: as many workers as the
		// venue executor can have calls in flight.
		Workers:    workers,
		Log:        base,
		Observe:    func(d time.Duration) { m.RiskOwnTime.Observe(d.Seconds()) },
		Dropped:    func() uint64 { return stream.engine.DroppedFor(updates) },
		FirstSweep: firstSweep,
	})
	if err != nil {
		return nil, err
	}
	relay.engine.Store(engine)
	return &holderRisk{engine: engine, desk: rd, restored: dk.RiskRestored()}, nil
}

// run loads the view, sweeps it and evaluates ticks until ctx ends; the balance refresh starts
// once the view is loaded. Its error is the engine's.
func (h *holderRisk) run(ctx context.Context) error {
	var aside sync.WaitGroup
	aside.Go(func() {
		select {
		case <-h.engine.Ready():
			h.desk.FollowBalances(ctx, balanceRefresh, h.engine.Apply)
		case <-ctx.Done():
		}
	})
	aside.Go(func() {
		select {
		case <-h.engine.Ready():
			h.desk.FlushTrails(ctx, h.trailFlush, h.engine.MovedTrails)
		case <-ctx.Done():
		}
	})
	// The first confirmed cycle after a gap sweeps everything the engine watches.
	aside.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.restored:
				h.engine.Sweep(ctx, risk.SweepLeaseRestored)
			}
		}
	})
	err := h.engine.Run(ctx)
	aside.Wait()
	return err
}

// marginCalls records an account's margin call and its end on the account, with their events
// (trading.RiskDesk.MarginCall), and raises the margin-call alert in the alert inbox at each
// crossing, recorded before or not.
type marginCalls struct {
	inbox *alert.Inbox
	desk  *trading.RiskDesk
}

func (a marginCalls) MarginCallCleared(ctx context.Context, accountID int64, _ float64) error {
	_, err := a.desk.MarginCall(ctx, accountID, false)
	return err
}

func (a marginCalls) MarginCall(ctx context.Context, accountID int64, level float64) error {
	if _, err := a.desk.MarginCall(ctx, accountID, true); err != nil {
		return err
	}
	return a.inbox.Raise(ctx, "margin-call", alert.Warning,
		fmt.Sprintf("Account %d is below its margin-call level: margin level %.2f%%. New margin-increasing orders and withdrawals are refused.", accountID, level),
		map[string]any{"accountId": accountID, "marginLevel": level})
}
