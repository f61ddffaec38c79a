package execution

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// Headroom is what the venue executor keeps beyond the open EXTERNAL positions: the trader opens
// and closes that arrive during a gap's burst of closes.
const Headroom = 64

// Sizing keeps the venue executor sized to the worst case — every open EXTERNAL position closed
// by one gap, plus Headroom (capped by the executor) — and its connections warm. Unpaced (the
// simulator), a resize runs in the caller, so the holder sizes before its risk engine can trigger
// a close. Paced to a real venue's connection rate, warming takes minutes: a resize then runs
// beside everything else, one at a time, and calls meanwhile dial what is not warm.
type Sizing struct {
	Executor *venue.Executor
	Desk     *trading.ABook
	// Warm is the probe that warms one connection (an account summary).
	Warm  func(context.Context) error
	Paced bool
	Log   *slog.Logger

	warming atomic.Bool
	warm    sync.WaitGroup
}

// Resize sizes the executor now (unpaced) or starts a warm-up beside the caller unless one is
// running (paced).
func (z *Sizing) Resize(ctx context.Context) {
	if !z.Paced {
		z.size(ctx)
		return
	}
	if z.warming.CompareAndSwap(false, true) {
		z.warm.Go(func() { defer z.warming.Store(false); z.size(ctx) })
	}
}

// Wait waits for a warm-up in flight; call it before the executor is closed.
func (z *Sizing) Wait() { z.warm.Wait() }

// size grows the executor to the open EXTERNAL positions plus Headroom (capped), and says so
// when that changed anything.
func (z *Sizing) size(ctx context.Context) {
	open, err := z.Desk.OpenExternalCount(ctx)
	if err != nil {
		z.Log.WarnContext(ctx, "venue executor not resized: open EXTERNAL positions unreadable", slog.Any("err", err))
		return
	}
	before := z.Executor.Stats()
	if err := z.Executor.Ensure(ctx, open+Headroom, z.Warm); err != nil && ctx.Err() == nil {
		z.Log.WarnContext(ctx, "venue connections not all warmed; calls past the warm ones dial on demand", slog.Any("err", err))
	}
	after := z.Executor.Stats()
	if after.Workers != before.Workers || after.Connections != before.Connections {
		z.Log.InfoContext(ctx, "venue executor sized", slog.Int("open_external_positions", open), slog.Int("worst_case", open+Headroom),
			slog.Int("cap", z.Executor.Cap()), slog.Int("workers", after.Workers), slog.Int64("connections", after.Connections))
	}
}
