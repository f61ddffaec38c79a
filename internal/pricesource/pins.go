package pricesource

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// Engine is what the dealer's side needs of the holder's tick engine; *tick.Engine is one.
type Engine interface {
	Pin(symbol, source string) error
	Halt(symbol string, halted bool) error
	Selections() []tick.Selection
	SourceStatuses() []tick.SourceStatus
	Rejected(limit int) []tick.RejectedTick
}

// Pin is one symbol's row of fx_price_source_pin: the source a dealer pinned it to ("" for
// none) and whether its quoting is halted.
type Pin struct {
	Symbol    string    `json:"symbol"`
	Source    string    `json:"pin"`
	Halted    bool      `json:"halted"`
	UpdatedAt time.Time `json:"updatedAt"`
	UpdatedBy string    `json:"updatedBy"`
}

// set is true while the pin does anything: a row exists only then.
func (p Pin) set() bool { return p.Source != "" || p.Halted }

// Change is a dealer's request for one symbol; a nil field is left as it is.
type Change struct {
	Pin    *string // "" unpins
	Halted *bool
}

// Pins reads and changes the dealer's pins, and applies them to the holder's engine once the
// process has one (SetEngine). It is safe for concurrent use.
type Pins struct {
	db     *sql.DB
	log    *slog.Logger
	engine atomic.Pointer[engineBox]
}

type engineBox struct {
	e        Engine
	controls map[string]string
}

// NewPins returns the pins over db (migrated to 000031 or later). Until SetEngine the process is
// not the holder: reads and changes answer EUNAVAILABLE.
func NewPins(db *sql.DB, log *slog.Logger) *Pins {
	return &Pins{db: db, log: log}
}

// ErrNotHolder answers a request for the engine's sources on a process that does not run it.
var ErrNotHolder = fx.Errorf(fx.EUNAVAILABLE, "Price sources are run by the process that holds the desk's lease, and this one does not: retry shortly, or send the request to the holder.")

// SetEngine makes e the engine this process quotes from (it became the holder) and applies
// every stored pin and halt to it, so a dealer's pin outlives the holder that took it. A row
// naming a source or symbol e does not know (the configuration changed since) is logged and
// left in the table. controls maps a bundled simulator source to its control API's base URL,
// for the dealer's view (nil for none).
func (p *Pins) SetEngine(ctx context.Context, e Engine, controls map[string]string) error {
	pins, err := p.List(ctx)
	if err != nil {
		return fmt.Errorf("re-apply price source pins: %w", err)
	}
	for _, pin := range pins {
		if err := apply(e, pin); err != nil {
			p.log.WarnContext(ctx, "price source pin not applied: the desk no longer has its symbol or source",
				slog.String("symbol", pin.Symbol), slog.String("source", pin.Source), slog.Bool("halted", pin.Halted), slog.Any("err", err))
			continue
		}
		p.log.InfoContext(ctx, "price source pin applied", slog.String("symbol", pin.Symbol), slog.String("source", pin.Source),
			slog.Bool("halted", pin.Halted), slog.String("by", pin.UpdatedBy))
	}
	p.engine.Store(&engineBox{e: e, controls: controls})
	return nil
}

// Controls maps each bundled simulator source of the holder's engine to its control API's base
// URL; nil off the holder.
func (p *Pins) Controls() map[string]string {
	if b := p.engine.Load(); b != nil {
		return b.controls
	}
	return nil
}

// Engine is the holder's engine, or nil on a process that is not the holder.
func (p *Pins) Engine() Engine {
	if b := p.engine.Load(); b != nil {
		return b.e
	}
	return nil
}

func apply(e Engine, pin Pin) error {
	if err := e.Pin(pin.Symbol, pin.Source); err != nil {
		return err
	}
	return e.Halt(pin.Symbol, pin.Halted)
}

const pinCols = "`symbol`, `source`, `halted`, `updatedAt`, `updatedBy`"

// List returns every stored pin, by symbol.
func (p *Pins) List(ctx context.Context) ([]Pin, error) {
	rows, err := p.db.QueryContext(ctx, "SELECT "+pinCols+" FROM `fx_price_source_pin` ORDER BY `symbol`")
	if err != nil {
		return nil, fmt.Errorf("list price source pins: %w", err)
	}
	defer rows.Close()
	out := []Pin{}
	for rows.Next() {
		var pin Pin
		if err := rows.Scan(&pin.Symbol, &pin.Source, &pin.Halted, &pin.UpdatedAt, &pin.UpdatedBy); err != nil {
			return nil, fmt.Errorf("list price source pins: %w", err)
		}
		out = append(out, pin)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list price source pins: %w", err)
	}
	return out, nil
}

// Set applies a dealer's change to symbol: checked against the engine (ENOTFOUND for a symbol
// the desk does not quote or a source it does not have), written with its audit row
// (price_source_pin.update, by ctx's actor) in one transaction, then applied to the engine. It
// returns the pin as it now is (Source "" and Halted false when nothing is set).
//
// Errors: EUNAVAILABLE off the holder (ErrNotHolder); EINVALID for a change that sets nothing;
// ENOTFOUND as above; audit.ErrNoActor when ctx names nobody; otherwise a wrapped database error.
func (p *Pins) Set(ctx context.Context, symbol string, c Change) (Pin, error) {
	e := p.Engine()
	if e == nil {
		return Pin{}, ErrNotHolder
	}
	if c.Pin == nil && c.Halted == nil {
		return Pin{}, fx.Errorf(fx.EINVALID, "Send pin (a source name, or \"\" to unpin) or halted (true or false), or both.")
	}
	if !slices.ContainsFunc(e.Selections(), func(s tick.Selection) bool { return s.Symbol == symbol }) {
		return Pin{}, fx.Errorf(fx.ENOTFOUND, "The desk does not quote symbol %q.", symbol)
	}
	if c.Pin != nil && *c.Pin != "" && !slices.ContainsFunc(e.SourceStatuses(), func(s tick.SourceStatus) bool { return s.Name == *c.Pin }) {
		return Pin{}, fx.Errorf(fx.ENOTFOUND, "The desk has no price source %q (its sources: %s).", *c.Pin, sourceNames(e))
	}
	actor, ok := audit.ActorFrom(ctx)
	if !ok {
		return Pin{}, audit.ErrNoActor
	}
	by := actor.Via
	switch {
	case actor.UserID != 0:
		by = "user-" + strconv.FormatInt(actor.UserID, 10)
	case actor.TokenID != 0:
		by = "token-" + strconv.FormatInt(actor.TokenID, 10)
	}
	before, after, err := p.write(ctx, symbol, c, by)
	if err != nil {
		return Pin{}, err
	}
	// The row is committed: a failure to apply now is the engine's defect, and the next holder
	// applies the row anyway.
	if err := apply(e, after); err != nil {
		return after, fmt.Errorf("apply price source pin %s to the engine: %w", symbol, err)
	}
	p.log.InfoContext(ctx, "price source pin changed", slog.String("symbol", symbol), slog.String("pinBefore", before.Source),
		slog.Bool("haltedBefore", before.Halted), slog.String("pin", after.Source), slog.Bool("halted", after.Halted), slog.String("by", by))
	return after, nil
}

func sourceNames(e Engine) string {
	var names []string
	for _, s := range e.SourceStatuses() {
		names = append(names, s.Name)
	}
	return fmt.Sprint(names)
}

// write is Set's transaction: the row as it was and is, and the audit row.
func (p *Pins) write(ctx context.Context, symbol string, c Change, by string) (before, after Pin, err error) {
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return before, after, fmt.Errorf("set price source pin %s: begin: %w", symbol, err)
	}
	defer tx.Rollback()
	before.Symbol = symbol
	err = tx.QueryRowContext(ctx, "SELECT "+pinCols+" FROM `fx_price_source_pin` WHERE `symbol` = ? FOR UPDATE", symbol).
		Scan(&before.Symbol, &before.Source, &before.Halted, &before.UpdatedAt, &before.UpdatedBy)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return before, after, fmt.Errorf("set price source pin %s: %w", symbol, err)
	}
	after = Pin{Symbol: symbol, Source: before.Source, Halted: before.Halted, UpdatedBy: by}
	if c.Pin != nil {
		after.Source = *c.Pin
	}
	if c.Halted != nil {
		after.Halted = *c.Halted
	}
	if after.set() {
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_price_source_pin` (`symbol`, `source`, `halted`, `updatedAt`, `updatedBy`) VALUES (?, ?, ?, UTC_TIMESTAMP(3), ?) "+
			"ON DUPLICATE KEY UPDATE `source` = VALUES(`source`), `halted` = VALUES(`halted`), `updatedAt` = VALUES(`updatedAt`), `updatedBy` = VALUES(`updatedBy`)",
			symbol, after.Source, after.Halted, by); err != nil {
			return before, after, fmt.Errorf("set price source pin %s: %w", symbol, err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT `updatedAt` FROM `fx_price_source_pin` WHERE `symbol` = ?", symbol).Scan(&after.UpdatedAt); err != nil {
			return before, after, fmt.Errorf("set price source pin %s: %w", symbol, err)
		}
	} else {
		if _, err := tx.ExecContext(ctx, "DELETE FROM `fx_price_source_pin` WHERE `symbol` = ?", symbol); err != nil {
			return before, after, fmt.Errorf("set price source pin %s: %w", symbol, err)
		}
		after.UpdatedAt = time.Now().UTC()
	}
	var was any
	if before.set() {
		was = before
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "price_source_pin.update", EntityType: "price_source_pin", EntityID: symbol, Before: was, After: after}); err != nil {
		return before, after, err
	}
	if err := tx.Commit(); err != nil {
		return before, after, fmt.Errorf("set price source pin %s: commit: %w", symbol, err)
	}
	return before, after, nil
}
