package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Admin is the dealer's side of the catalog: it lists and changes instruments and account
// groups, and moves accounts between groups. Every change invalidates the process's Cache, so the
// trading rules price the next order under it, and records an audit row, from which the
// holder's TermsFollower hands the risk engine whatever changed how accounts are marked.
type Admin struct {
	db    *sql.DB
	cache *Cache
	log   *slog.Logger
	venue bool
}

// AdminConfig builds an Admin.
type AdminConfig struct {
	DB    *sql.DB
	Cache *Cache // the cache the process's trading rules read; required
	Log   *slog.Logger
	// Venue is true where an execution venue is configured: only then may a group be EXTERNAL.
	Venue bool
}

// NewAdmin returns the admin over c.DB; it refuses a missing dependency.
func NewAdmin(c AdminConfig) (*Admin, error) {
	if c.DB == nil || c.Cache == nil {
		return nil, errors.New("catalog admin: DB and Cache are required")
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return &Admin{db: c.DB, cache: c.Cache, log: c.Log, venue: c.Venue}, nil
}

// retry runs one admin transaction again while the server rolls it back (store.RetryRolledBack).
func (s *Admin) retry(ctx context.Context, txn func() error) error {
	return store.RetryRolledBack(ctx, txn)
}

// Instruments lists every instrument with its trading terms, read from the database.
func (s *Admin) Instruments(ctx context.Context) ([]Instrument, error) {
	cat, err := Load(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return cat.List, nil
}

// InstrumentPatch changes some terms of one instrument; nil fields stay as they are.
type InstrumentPatch struct {
	Symbol      string
	Status      *fx.InstrumentStatus
	LeverageMax *int
	VolumeMin   *decimal.Decimal
	VolumeStep  *decimal.Decimal
	VolumeMax   *decimal.Decimal
	SymbolGroup *string
}

// Column bounds of the instrument terms an admin may change (migrations 000002, 000003): volumes
// are DECIMAL(12,4) lots, leverageMax an INT the desk caps at 10000.
var (
	volumeColumnMax = decimal.RequireFromString("99999999.9999")
	volumeColumnMin = decimal.New(1, -volumeScale)
)

const (
	volumeScale    = 4
	leverageMaxLow = 1
	leverageMaxTop = 10000
)

// checkVolumeTerm checks one volume term against its column: positive, at most four decimals,
// at most 99999999.9999 lots.
func checkVolumeTerm(field string, v decimal.Decimal) error {
	if v.LessThan(volumeColumnMin) || v.GreaterThan(volumeColumnMax) || !v.Equal(v.Truncate(volumeScale)) {
		return fx.Errorf(fx.EINVALID, "%s must be from %s to %s lots with at most %d decimals (got %s).",
			field, volumeColumnMin, volumeColumnMax, volumeScale, v)
	}
	return nil
}

// checkVolumeTerms checks an instrument's volume terms as they will be after a change: each in
// its column's range, max ≥ min, and min a whole multiple of step — an order's volume must be a
// multiple of step (checkVolume), so a minimum that is not could never be traded.
func checkVolumeTerms(at string, vmin, vstep, vmax decimal.Decimal) error {
	for _, f := range []struct {
		name string
		v    decimal.Decimal
	}{{"volumeMin", vmin}, {"volumeStep", vstep}, {"volumeMax", vmax}} {
		if err := checkVolumeTerm(at+"."+f.name, f.v); err != nil {
			return err
		}
	}
	if !vmin.Mod(vstep).IsZero() {
		return fx.Errorf(fx.EINVALID, "%s: volumeMin %s must be a whole multiple of volumeStep %s, or the minimum could never be traded.", at, vmin, vstep)
	}
	if vmax.LessThan(vmin) {
		return fx.Errorf(fx.EINVALID, "%s: volumeMax %s must be at least volumeMin %s.", at, vmax, vmin)
	}
	return nil
}

// PutInstruments applies every patch in one transaction, after checking all of them against the
// rules and the columns they are written to: either all apply or none (EINVALID names the first
// bad field and its range).
func (s *Admin) PutInstruments(ctx context.Context, patches []InstrumentPatch) ([]Instrument, error) {
	if len(patches) == 0 {
		return nil, fx.Errorf(fx.EINVALID, "No instruments to change.")
	}
	cat, err := Load(ctx, s.db)
	if err != nil {
		return nil, err
	}
	for i, p := range patches {
		if _, ok := cat.Instruments[p.Symbol]; !ok {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: unknown symbol %q.", i, p.Symbol)
		}
		at := fmt.Sprintf("instruments[%d]", i)
		if p.Status != nil && !p.Status.Valid() {
			return nil, fx.Errorf(fx.EINVALID, "%s.status must be ACTIVE, CLOSE_ONLY or HALTED.", at)
		}
		if p.LeverageMax != nil && (*p.LeverageMax < leverageMaxLow || *p.LeverageMax > leverageMaxTop) {
			return nil, fx.Errorf(fx.EINVALID, "%s.leverageMax must be a whole number from %d to %d (got %d).", at, leverageMaxLow, leverageMaxTop, *p.LeverageMax)
		}
		if p.SymbolGroup != nil {
			if _, ok := cat.SymbolGroups[*p.SymbolGroup]; !ok {
				return nil, fx.Errorf(fx.EINVALID, "%s.symbolGroup: unknown symbol group %q.", at, *p.SymbolGroup)
			}
		}
		for _, f := range []struct {
			name string
			v    *decimal.Decimal
		}{{"volumeMin", p.VolumeMin}, {"volumeStep", p.VolumeStep}, {"volumeMax", p.VolumeMax}} {
			if f.v != nil {
				if err := checkVolumeTerm(at+"."+f.name, *f.v); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := s.retry(ctx, func() error { return s.putInstruments(ctx, patches) }); err != nil {
		return nil, err
	}
	s.cache.Invalidate()
	return s.Instruments(ctx)
}

// putInstruments is PutInstruments' transaction. The volume terms are checked together on the
// locked rows, as they will be written, so two admins changing one instrument at once cannot
// each pass alone and leave a pair that could never be traded. Each patch is one audit row, the
// instrument's terms before and after it (docs/operations.md, «Audit log»).
func (s *Admin) putInstruments(ctx context.Context, patches []InstrumentPatch) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("update instruments: %w", err)
	}
	defer tx.Rollback()
	for i, p := range patches {
		var before instrumentTerms
		if err := tx.QueryRowContext(ctx, "SELECT `status`, `leverageMax`, `volumeMin`, `volumeStep`, `volumeMax`, `symbolGroup` FROM `fx_instrument` WHERE `symbol` = ? FOR UPDATE", p.Symbol).
			Scan(&before.Status, &before.LeverageMax, &before.VolumeMin, &before.VolumeStep, &before.VolumeMax, &before.SymbolGroup); err != nil {
			return fmt.Errorf("update instrument %s: %w", p.Symbol, err)
		}
		after := before.apply(p)
		if err := checkVolumeTerms(fmt.Sprintf("instruments[%d] (%s)", i, p.Symbol), after.VolumeMin, after.VolumeStep, after.VolumeMax); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_instrument` SET `status` = COALESCE(?, `status`), `leverageMax` = COALESCE(?, `leverageMax`), "+
			"`volumeMin` = COALESCE(?, `volumeMin`), `volumeStep` = COALESCE(?, `volumeStep`), `volumeMax` = COALESCE(?, `volumeMax`), "+
			"`symbolGroup` = COALESCE(?, `symbolGroup`) WHERE `symbol` = ?",
			p.Status, p.LeverageMax, p.VolumeMin, p.VolumeStep, p.VolumeMax, p.SymbolGroup, p.Symbol); err != nil {
			return fmt.Errorf("update instrument %s: %w", p.Symbol, err)
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "instrument.update", EntityType: "instrument", EntityID: p.Symbol, Before: before, After: after}); err != nil {
			return err
		}
	}
	if err := store.Commit(tx); err != nil {
		return fmt.Errorf("update instruments: %w", err)
	}
	return nil
}

// Current is the catalog as the cache holds it (re-read at most every few seconds, and at once
// after this process's admin changes), for a reader that polls: the dealer's P&L.
func (s *Admin) Current(ctx context.Context) (*Catalog, error) { return s.cache.Get(ctx) }

// Tradable returns the enabled instruments by symbol and in symbol order, from the catalog cache
// (re-read at most every few seconds), so the markets routes do not query the database per request.
// The map and slice are shared and must not be modified.
func (s *Admin) Tradable(ctx context.Context) (map[string]Instrument, []Instrument, error) {
	cat, err := s.cache.Get(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cat.Tradable, cat.TradableList, nil
}

// QuotedDigits is symbol's quoted decimals if it is a tradable instrument, from the catalog as
// last loaded: it never waits for a reload, so a caller on a hot path (the markets rail's fan-out)
// is not held up by the database.
func (s *Admin) QuotedDigits(ctx context.Context, symbol string) (int, bool) {
	cat, err := s.cache.LastLoaded(ctx)
	if err != nil {
		return 0, false
	}
	in, ok := cat.Tradable[symbol]
	return in.Digits, ok
}

// EnsureAccountGroup creates account group name with the default terms if it is missing and
// sets its execution mode (the demo's A-book group). An existing group keeps its other terms.
func (s *Admin) EnsureAccountGroup(ctx context.Context, name string, mode fx.ExecutionMode) error {
	_, err := s.CreateAccountGroup(ctx, name, AccountGroupPatch{Execution: &mode})
	if fx.ErrorCode(err) == fx.ECONFLICT {
		_, err = s.SetExecutionMode(ctx, name, mode)
	}
	return err
}
