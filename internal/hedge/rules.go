package hedge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
)

// Rules carries out HEDGE n% routing (docs/routing.md, «Hedge book») on the lease holder, off
// the trader's path: the trader's order is booked on the desk and answered; then Rules opens n%
// of the position at the venue in the hedge book, and closes that hedge once the client position
// is closed. It works from durable state alone — open client positions a HEDGE order opened
// (fx_position.hedgePercent, indexed with the status) that have no hedge order SENDING, FILLED or
// REJECTED; open hedge positions whose client position is closed — so a holder that takes over
// finishes what the previous one left. A sweep costs the open HEDGE positions, not the book.
//
// A hedge order the venue REJECTED is not tried again for that client position (the dealer
// sees it in fx_hedge_order); one that was NOT_SENT (the venue unreachable, the gate) is.
// A partial close of the client position leaves its hedge as it is; the full close closes it.
type Rules struct {
	book  *Book
	every time.Duration
	kick  chan struct{}
	log   *slog.Logger
}

// sweepBatch bounds the work of one sweep; what is left, the next sweep does.
const sweepBatch = 100

// NewRules sweeps every interval and whenever kicked; b must be able to send.
func NewRules(b *Book, every time.Duration, log *slog.Logger) (*Rules, error) {
	if b == nil || b.cfg.Venue == nil {
		return nil, errors.New("hedge rules: a hedge book with a venue is required")
	}
	if every <= 0 {
		return nil, fmt.Errorf("hedge rules: the sweep interval must be positive, got %s", every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rules{book: b, every: every, kick: make(chan struct{}, 1), log: log}, nil
}

// Kick asks for a sweep soon (a position opened or closed); it never blocks.
func (r *Rules) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run sweeps at once, then on every kick and every interval, until ctx ends.
func (r *Rules) Run(ctx context.Context) error {
	t := time.NewTicker(r.every)
	defer t.Stop()
	for {
		if _, _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, gate.ErrNotHolder) {
			r.log.WarnContext(ctx, "hedge rules sweep failed; the next one starts from state again", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.kick:
		}
	}
}

// due is a client position routed HEDGE n% without its hedge.
type due struct {
	positionID   int64
	symbol       string
	side         fx.Side
	volume       decimal.Decimal
	contractSize decimal.Decimal
	percent      int64
}

// Sweep opens the hedges that are due and closes those whose client position closed; it
// returns how many of each it did. It stops at the first send the gate drops.
func (r *Rules) Sweep(ctx context.Context) (opened, closed int, err error) {
	list, err := store.QueryAll(ctx, r.book.cfg.DB, "hedges due", func(sc store.Scanner) (due, error) {
		var d due
		err := sc.Scan(&d.positionID, &d.symbol, &d.side, &d.volume, &d.contractSize, &d.percent)
		return d, err
	}, "SELECT p.`id`, p.`symbol`, p.`side`, p.`volume`, i.`contractSize`, p.`hedgePercent` FROM `fx_position` p "+
		"JOIN `fx_instrument` i ON i.`symbol` = p.`symbol` "+
		"WHERE p.`status` = 'OPEN' AND p.`hedgePercent` IS NOT NULL AND NOT EXISTS (SELECT 1 FROM `fx_hedge_order` h "+
		"WHERE h.`clientPositionId` = p.`id` AND h.`status` IN ('SENDING', 'FILLED', 'REJECTED')) ORDER BY p.`id` LIMIT ?", sweepBatch)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range list {
		units := ShareUnits(d.volume, d.contractSize, d.percent, d.side)
		if units.IsZero() {
			continue
		}
		_, err := r.book.Open(ctx, d.symbol, units, ForPosition(d.positionID))
		switch {
		case err == nil:
			opened++
		case errors.Is(err, gate.ErrNotHolder):
			return opened, closed, err
		case errors.Is(err, ErrAlreadyHedged):
		default:
			r.log.WarnContext(ctx, "HEDGE rule's share not opened", slog.Int64("client_position_id", d.positionID), slog.String("symbol", d.symbol),
				slog.String("units", units.String()), slog.Any("err", err))
		}
	}
	ids, err := store.QueryAll(ctx, r.book.cfg.DB, "hedges to close", store.ScanInt64,
		"SELECT h.`id` FROM `fx_hedge_position` h JOIN `fx_position` p ON p.`id` = h.`clientPositionId` "+
			"WHERE h.`status` = 'OPEN' AND p.`status` = 'CLOSED' ORDER BY h.`id` LIMIT ?", sweepBatch)
	if err != nil {
		return opened, closed, err
	}
	for _, id := range ids {
		err := r.book.Close(ctx, id)
		switch {
		case err == nil:
			closed++
		case errors.Is(err, gate.ErrNotHolder):
			return opened, closed, err
		default:
			r.log.WarnContext(ctx, "hedge of a closed client position not closed; tried again next sweep", slog.Int64("hedge_position_id", id), slog.Any("err", err))
		}
	}
	return opened, closed, nil
}

// ShareUnits is percent of a client position of volume lots on side, as signed venue units
// rounded to the venue's unit (whole units, half away from zero): the desk hedges a client's
// buy by buying at the venue.
func ShareUnits(volume, contractSize decimal.Decimal, percent int64, side fx.Side) decimal.Decimal {
	u := volume.Mul(contractSize).Mul(decimal.NewFromInt(percent)).Div(decimal.NewFromInt(100)).Round(0)
	if side == fx.Sell {
		u = u.Neg()
	}
	return u
}
