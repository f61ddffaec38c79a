package trading

import (
	"context"
	"fmt"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
)

// Instruments lists every instrument with its trading terms (admin).
func (s *Service) Instruments(ctx context.Context) ([]Instrument, error) {
	cat, err := loadCatalog(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return cat.list, nil
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

// PutInstruments applies every patch in one transaction, after checking all of them: either all
// apply or none (EINVALID names the first bad one).
func (s *Service) PutInstruments(ctx context.Context, patches []InstrumentPatch) ([]Instrument, error) {
	if len(patches) == 0 {
		return nil, fx.Errorf(fx.EINVALID, "No instruments to change.")
	}
	cat, err := loadCatalog(ctx, s.db)
	if err != nil {
		return nil, err
	}
	for i, p := range patches {
		in, ok := cat.instruments[p.Symbol]
		if !ok {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: unknown symbol %q.", i, p.Symbol)
		}
		if p.Status != nil && !p.Status.Valid() {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: status must be ACTIVE, CLOSE_ONLY or HALTED.", i)
		}
		if p.LeverageMax != nil && (*p.LeverageMax < 1 || *p.LeverageMax > 10000) {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: leverageMax must be from 1 to 10000.", i)
		}
		if p.SymbolGroup != nil {
			if _, ok := cat.symbolGroups[*p.SymbolGroup]; !ok {
				return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: unknown symbol group %q.", i, *p.SymbolGroup)
			}
		}
		vmin, vstep, vmax := in.VolumeMin, in.VolumeStep, in.VolumeMax
		if p.VolumeMin != nil {
			vmin = *p.VolumeMin
		}
		if p.VolumeStep != nil {
			vstep = *p.VolumeStep
		}
		if p.VolumeMax != nil {
			vmax = *p.VolumeMax
		}
		if !vmin.IsPositive() || !vstep.IsPositive() || vmax.LessThan(vmin) {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: volumes need min > 0, step > 0 and max ≥ min.", i)
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("update instruments: %w", err)
	}
	defer tx.Rollback()
	for _, p := range patches {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_instrument` SET `status` = COALESCE(?, `status`), `leverageMax` = COALESCE(?, `leverageMax`), "+
			"`volumeMin` = COALESCE(?, `volumeMin`), `volumeStep` = COALESCE(?, `volumeStep`), `volumeMax` = COALESCE(?, `volumeMax`), "+
			"`symbolGroup` = COALESCE(?, `symbolGroup`) WHERE `symbol` = ?",
			p.Status, p.LeverageMax, p.VolumeMin, p.VolumeStep, p.VolumeMax, p.SymbolGroup, p.Symbol); err != nil {
			return nil, fmt.Errorf("update instrument %s: %w", p.Symbol, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("update instruments: %w", err)
	}
	s.catalog.invalidate()
	list, err := s.Instruments(ctx)
	if err != nil {
		return nil, err
	}
	patched := map[string]bool{}
	for _, p := range patches {
		patched[p.Symbol] = true
	}
	var changes []risk.Change
	for _, in := range list {
		if patched[in.Symbol] {
			changes = append(changes, risk.Change{Kind: risk.InstrumentUpserted, Instrument: riskInstrument(in)})
		}
	}
	s.notify(ctx, changes...)
	return list, nil
}

// Tradable returns the enabled instruments by symbol and in symbol order, from the catalog cache
// (re-read at most every few seconds), so the markets routes do not query the database per request.
// The map and slice are shared and must not be modified.
func (s *Service) Tradable(ctx context.Context) (map[string]Instrument, []Instrument, error) {
	cat, err := s.catalog.get(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cat.tradable, cat.tradableList, nil
}

// EnsureAccountGroup creates account group name with the default limits if it is missing and
// sets its execution mode (the demo's A-book group). An existing group keeps its limits.
func (s *Service) EnsureAccountGroup(ctx context.Context, name string, mode fx.ExecutionMode) error {
	if _, err := s.db.ExecContext(ctx, "INSERT IGNORE INTO `fx_account_group` (`name`) VALUES (?)", name); err != nil {
		return fmt.Errorf("account group %s: %w", name, err)
	}
	if _, err := s.SetExecutionMode(ctx, name, mode); err != nil {
		return err
	}
	s.catalog.invalidate()
	return nil
}

// MoveAccount puts account id in account group group. An account with open positions or orders
// in flight is refused (ECONFLICT): its positions were priced under the old group's terms.
func (s *Service) MoveAccount(ctx context.Context, id int64, group string) error {
	res, err := s.db.ExecContext(ctx, "UPDATE `fx_account` a SET a.`accountGroup` = ? WHERE a.`id` = ? "+
		"AND NOT EXISTS (SELECT 1 FROM `fx_position` p WHERE p.`accountId` = a.`id` AND p.`status` = 'OPEN') "+
		"AND NOT EXISTS (SELECT 1 FROM `fx_order` o WHERE o.`accountId` = a.`id` AND o.`status` IN ('PENDING', 'SENDING'))", group, id)
	if err != nil {
		return fmt.Errorf("move account %d to %s: %w", id, group, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var cur string
		if err := s.db.QueryRowContext(ctx, "SELECT `accountGroup` FROM `fx_account` WHERE `id` = ?", id).Scan(&cur); err != nil {
			return accountNotFound(id)
		}
		if cur != group {
			return fx.Errorf(fx.ECONFLICT, "Account %d has open positions or orders in flight: it cannot change account group.", id)
		}
	}
	return nil
}
