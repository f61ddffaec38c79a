package hedge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/store"
	"fxdesk/internal/venue"
)

// Rules carries out HEDGE n% routing (docs/routing.md, «Hedge book») on the lease holder, off
// the trader's path: the trader's order is booked on the desk and answered; then Rules opens n%
// of the position at the venue in the hedge book, reduces that hedge to n% of what is left when
// the client closes part of the position, and closes it once the client position is closed. It
// works from durable state alone — open client positions a HEDGE order opened
// (fx_position.hedgePercent, indexed with the status) that have no hedge order SENDING or
// FILLED; open hedges larger than their share of what is left of their client position; open
// hedges whose client position is closed — so a holder that takes over finishes what the
// previous one left. A sweep costs the open HEDGE positions, not the book.
//
// Nothing is decided for a client position while a hedge order of it is SENDING: its outcome is
// unknown until the reconciler resolves it, and it is never sent again. A send the venue
// REJECTED or that was NOT_SENT (the venue unreachable) is decided again by the first sweep past
// its back-off (Backoff, as the hedger's), not by every sweep: a sweep runs on every fill, and a
// refusing venue would get an order per due position per fill.
type Rules struct {
	book  *Book
	every time.Duration
	now   func() time.Time
	kick  chan struct{}
	log   *slog.Logger

	mu      sync.Mutex       // one sweep at a time: the back-off is the sweep's
	backoff *Backoff[string] // by send: "open <client position>", "reduce <hedge position>", "close <hedge position>"
}

// sweepBatch bounds the work of one sweep; what is left, the next sweep does.
const sweepBatch = 100

// NewRules sweeps every interval and whenever kicked; b must be able to send. now is the clock
// the back-off runs on (nil: time.Now).
func NewRules(b *Book, every time.Duration, now func() time.Time, log *slog.Logger) (*Rules, error) {
	if b == nil || b.cfg.Venue == nil {
		return nil, errors.New("hedge rules: a hedge book with a venue is required")
	}
	if every <= 0 {
		return nil, fmt.Errorf("hedge rules: the sweep interval must be positive, got %s", every)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Rules{book: b, every: every, now: now, kick: make(chan struct{}, 1), log: log, backoff: NewBackoff[string]()}, nil
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
		if _, _, _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, gate.ErrNotHolder) {
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

// Sweep opens the hedges that are due, reduces those larger than their share of what is left of
// their client position, and closes those whose client position closed; it returns how many of
// each it did. It stops at the first send the gate drops. A send whose last try failed waits
// out its back-off.
func (r *Rules) Sweep(ctx context.Context) (opened, reduced, closed int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list, err := store.QueryAll(ctx, r.book.cfg.DB, "hedges due", func(sc store.Scanner) (due, error) {
		var d due
		err := sc.Scan(&d.positionID, &d.symbol, &d.side, &d.volume, &d.contractSize, &d.percent)
		return d, err
	}, "SELECT p.`id`, p.`symbol`, p.`side`, p.`volume`, i.`contractSize`, p.`hedgePercent` FROM `fx_position` p "+
		"JOIN `fx_instrument` i ON i.`symbol` = p.`symbol` "+
		"WHERE p.`status` = 'OPEN' AND p.`hedgePercent` IS NOT NULL AND NOT EXISTS (SELECT 1 FROM `fx_hedge_order` h "+
		"WHERE h.`clientPositionId` = p.`id` AND h.`status` IN ('SENDING', 'FILLED')) ORDER BY p.`id` LIMIT ?", sweepBatch)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, d := range list {
		units := ShareUnits(d.volume, d.contractSize, d.percent, d.side)
		key := "open " + strconv.FormatInt(d.positionID, 10)
		if units.IsZero() || r.waiting(key) {
			continue
		}
		_, err := r.book.Open(ctx, d.symbol, units, ForPosition(d.positionID))
		switch {
		case err == nil:
			opened++
			r.backoff.Done(key)
		case errors.Is(err, gate.ErrNotHolder):
			return opened, reduced, closed, err
		case errors.Is(err, ErrAlreadyHedged), errors.Is(err, ErrClientPositionClosed):
			r.backoff.Done(key)
		default:
			until := r.fail(key, err)
			r.log.WarnContext(ctx, "HEDGE rule's share not opened; tried again after its back-off", slog.Int64("client_position_id", d.positionID), slog.String("symbol", d.symbol),
				slog.String("units", units.String()), slog.Time("retry_after", until), slog.Any("err", err))
		}
	}
	if reduced, err = r.reduce(ctx); err != nil {
		return opened, reduced, closed, err
	}
	ids, err := store.QueryAll(ctx, r.book.cfg.DB, "hedges to close", store.ScanInt64,
		"SELECT h.`id` FROM `fx_hedge_position` h JOIN `fx_position` p ON p.`id` = h.`clientPositionId` "+
			"WHERE h.`status` = 'OPEN' AND p.`status` = 'CLOSED' AND NOT EXISTS (SELECT 1 FROM `fx_hedge_order` o "+
			"WHERE o.`clientPositionId` = p.`id` AND o.`status` = 'SENDING') ORDER BY h.`id` LIMIT ?", sweepBatch)
	if err != nil {
		return opened, reduced, closed, err
	}
	for _, id := range ids {
		key := "close " + strconv.FormatInt(id, 10)
		if r.waiting(key) {
			continue
		}
		err := r.book.Close(ctx, id)
		switch {
		case err == nil:
			closed++
			r.backoff.Done(key)
		case errors.Is(err, gate.ErrNotHolder):
			return opened, reduced, closed, err
		default:
			until := r.fail(key, err)
			r.log.WarnContext(ctx, "hedge of a closed client position not closed; tried again after its back-off", slog.Int64("hedge_position_id", id),
				slog.Time("retry_after", until), slog.Any("err", err))
		}
	}
	// A key whose send is not due any more (its position closed, hedged elsewhere) is never
	// asked again: forget it once it waited its time.
	now := r.now()
	r.backoff.Keep(func(key string) bool { _, waiting := r.backoff.Waiting(key, now); return waiting })
	return opened, reduced, closed, nil
}

// fail records that send key failed with err and answers when it may be tried again. An unknown
// outcome waits for nothing here: its SENDING row holds every decision on its client position
// until the reconciler resolves it, and what follows is a new decision.
func (r *Rules) fail(key string, err error) time.Time {
	if errors.Is(err, venue.ErrOutcomeUnknown) {
		r.backoff.Done(key)
		return r.now()
	}
	return r.backoff.Fail(key, r.now(), r.every)
}

// waiting is whether send key failed last and waits out its back-off.
func (r *Rules) waiting(key string) bool {
	_, waiting := r.backoff.Waiting(key, r.now())
	return waiting
}

// oversized is an open RULE hedge larger than its share of what is left of its client position.
type oversized struct {
	hedgeID int64
	units   decimal.Decimal // the hedge position's, signed
	due
}

// reduce brings every open RULE hedge of a partly closed client position down to its share of
// what is left (ShareUnits, as the open), through a partial close at the venue (Book.Reduce). A
// hedge is never grown: a share the venue reduced on its own stays as it is. A client position
// with two open hedges (a NOT_SENT open the venue filled after all, adopted beside its retry) is
// left as it is: sized one by one, both would be brought to the whole share; the full close
// closes both.
func (r *Rules) reduce(ctx context.Context) (reduced int, err error) {
	// The SQL narrows the list with the open's rounding; ShareUnits decides.
	list, err := store.QueryAll(ctx, r.book.cfg.DB, "hedges to reduce", func(sc store.Scanner) (oversized, error) {
		var o oversized
		err := sc.Scan(&o.hedgeID, &o.units, &o.positionID, &o.symbol, &o.side, &o.volume, &o.contractSize, &o.percent)
		return o, err
	}, "SELECT h.`id`, h.`units`, p.`id`, p.`symbol`, p.`side`, p.`volume`, i.`contractSize`, p.`hedgePercent` FROM `fx_position` p "+
		"JOIN `fx_instrument` i ON i.`symbol` = p.`symbol` JOIN `fx_hedge_position` h ON h.`clientPositionId` = p.`id` AND h.`status` = 'OPEN' "+
		"WHERE p.`status` = 'OPEN' AND p.`hedgePercent` IS NOT NULL AND ABS(h.`units`) > ROUND(p.`volume` * i.`contractSize` * p.`hedgePercent` / 100, 0) "+
		"AND NOT EXISTS (SELECT 1 FROM `fx_hedge_order` o WHERE o.`clientPositionId` = p.`id` AND o.`status` = 'SENDING') "+
		"AND NOT EXISTS (SELECT 1 FROM `fx_hedge_position` h2 WHERE h2.`clientPositionId` = p.`id` AND h2.`status` = 'OPEN' AND h2.`id` <> h.`id`) "+
		"ORDER BY p.`id` LIMIT ?", sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, o := range list {
		leave := ShareUnits(o.volume, o.contractSize, o.percent, o.side)
		key := "reduce " + strconv.FormatInt(o.hedgeID, 10)
		if !leave.Abs().LessThan(o.units.Abs()) || r.waiting(key) {
			continue
		}
		if leave.IsZero() {
			err = r.book.Close(ctx, o.hedgeID)
		} else {
			err = r.book.Reduce(ctx, o.hedgeID, o.units, leave)
		}
		switch {
		case err == nil:
			reduced++
			r.backoff.Done(key)
		case errors.Is(err, gate.ErrNotHolder):
			return reduced, err
		case errors.Is(err, ErrReduceNotDue):
			r.backoff.Done(key)
		default:
			until := r.fail(key, err)
			r.log.WarnContext(ctx, "HEDGE rule's share not reduced; decided again after its back-off", slog.Int64("client_position_id", o.positionID),
				slog.Int64("hedge_position_id", o.hedgeID), slog.String("units", o.units.String()), slog.String("leave_units", leave.String()),
				slog.Time("retry_after", until), slog.Any("err", err))
		}
	}
	return reduced, nil
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
