package book

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/tick"
)

// Converter is one run's view of prices and instruments for the scheduled jobs (swaps, account
// marks): the same market the fills use — the same USD hub, the same exact arithmetic, each
// symbol's quote read once per run — so a rollover is converted exactly as a commission is.
// It is not safe for concurrent use.
type Converter struct {
	m      *Market
	misses *missRecorder
}

// NewConverter reads the instrument catalog and returns a converter over prices (the tick
// engine's view on a web process, the quote mirror's in fxdesk-cron).
func NewConverter(ctx context.Context, db *sql.DB, prices tick.Prices) (*Converter, error) {
	cat, err := catalog.Load(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("converter: %w", err)
	}
	rec := &missRecorder{prices: prices}
	return &Converter{m: NewMarket(rec, cat), misses: rec}, nil
}

// Terms returns symbol's instrument with the trading terms account group accountGroup gets on it
// (catalog.Catalog.Effective): its swap points, its markup, its leverage cap.
func (c *Converter) Terms(accountGroup, symbol string) (catalog.Instrument, bool) {
	t, ok := c.m.Catalog.Effective(accountGroup, symbol)
	return t.Instrument, ok
}

// Convert turns amount in from into to through the USD hub, rounded once to the ledger's
// precision. When it cannot, missing lists the hub legs this process has no usable mid for
// (every leg, not only the first, so one pin asks for all of them); it is empty when the catalog
// has no pair that reaches USD for one of the currencies.
func (c *Converter) Convert(amount decimal.Decimal, from, to string) (out decimal.Decimal, missing []string, ok bool) {
	if out, ok := c.m.Convert(amount, from, to); ok {
		return out, nil, true
	}
	c.misses.start()
	c.m.toUSD(from)
	c.m.toUSD(to)
	return decimal.Decimal{}, c.misses.stop(), false
}

// Marks computes account a's equity and used margin with balance and its open exposures, as
// the fills mark them. ok is false when some symbol or conversion leg has no usable price.
func (c *Converter) Marks(a Account, balance decimal.Decimal, exps []Exposure) (Metrics, bool) {
	return c.m.Metrics(a, c.m.Catalog.AccountGroup(a.Group), balance, exps)
}

// missRecorder passes prices through and, while recording, notes every symbol that had no
// usable quote: exactly the legs the hub asked for and did not get.
type missRecorder struct {
	prices    tick.Prices
	recording bool
	missed    []string
}

func (r *missRecorder) start() { r.recording, r.missed = true, r.missed[:0] }

func (r *missRecorder) stop() []string {
	r.recording = false
	out := slices.Clone(r.missed)
	slices.Sort(out)
	return slices.Compact(out)
}

func (r *missRecorder) LastTick(symbol string) (tick.Quote, bool) {
	if r.prices == nil {
		r.miss(symbol)
		return tick.Quote{}, false
	}
	q, ok := r.prices.LastTick(symbol)
	if !ok {
		r.miss(symbol)
	}
	return q, ok
}

func (r *missRecorder) SymbolState(symbol string) tick.State {
	if r.prices == nil {
		return tick.QuotingHalted
	}
	st := r.prices.SymbolState(symbol)
	if st == tick.QuotingHalted {
		r.miss(symbol)
	}
	return st
}

func (r *missRecorder) miss(symbol string) {
	if r.recording {
		r.missed = append(r.missed, symbol)
	}
}
