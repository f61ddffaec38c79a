package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Account groups: create, read, change, delete, and their execution mode.

// AccountGroups lists the account groups with their terms.
func (s *Admin) AccountGroups(ctx context.Context) ([]AccountGroup, error) {
	return store.QueryAll(ctx, s.db, "account groups", scanAccountGroup, "SELECT "+accountGroupCols+" FROM `fx_account_group` ORDER BY `name`")
}

// AccountGroup is group name's terms (ENOTFOUND when there is none).
func (s *Admin) AccountGroup(ctx context.Context, name string) (AccountGroup, error) {
	g, err := scanAccountGroup(s.db.QueryRowContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group` WHERE `name` = ?", name))
	if errors.Is(err, sql.ErrNoRows) {
		return AccountGroup{}, groupNotFound(name)
	}
	if err != nil {
		return AccountGroup{}, fmt.Errorf("account group %s: %w", name, err)
	}
	return g, nil
}

func groupNotFound(name string) error {
	return fx.Errorf(fx.ENOTFOUND, "Account group %q not found.", name)
}

// AccountGroupPatch changes some terms of an account group; nil fields stay as they are. A
// group's own cap on resting orders can be removed (the desk setting applies again), so it is
// set only when SetMaxPendingOrders is true, to MaxPendingOrders (nil: none).
type AccountGroupPatch struct {
	LeverageMax               *int
	MarginCallLevel           *decimal.Decimal
	StopOutLevel              *decimal.Decimal
	Execution                 *fx.ExecutionMode
	SwapFreeDefault           *bool
	NegativeBalanceProtection *bool
	SetMaxPendingOrders       bool
	MaxPendingOrders          *int
	PositionMode              *fx.PositionMode
}

// apply is g with p's changes.
func (p AccountGroupPatch) apply(g AccountGroup) AccountGroup {
	if p.LeverageMax != nil {
		g.LeverageMax = *p.LeverageMax
	}
	if p.MarginCallLevel != nil {
		g.MarginCallLevel = *p.MarginCallLevel
	}
	if p.StopOutLevel != nil {
		g.StopOutLevel = *p.StopOutLevel
	}
	if p.Execution != nil {
		g.Execution = *p.Execution
	}
	if p.SwapFreeDefault != nil {
		g.SwapFreeDefault = *p.SwapFreeDefault
	}
	if p.NegativeBalanceProtection != nil {
		g.NegativeBalanceProtection = *p.NegativeBalanceProtection
	}
	if p.SetMaxPendingOrders {
		g.MaxPendingOrders = p.MaxPendingOrders
	}
	if p.PositionMode != nil {
		g.PositionMode = *p.PositionMode
	}
	return g
}

// Bounds of an account group's terms: the columns (migrations 000003, 000013: levels are
// DECIMAL(7,2) percent, the pending-order cap an INT) and the desk's rules (the leverage cap of an
// instrument, the range of the desk's own pending-order setting).
var levelColumnMax = decimal.RequireFromString("99999.99")

const (
	levelScale          = 2
	groupNameMax        = 32
	maxPendingOrdersLow = 1
	maxPendingOrdersTop = 10000
)

// groupName is what an account group may be called: it travels in URL paths and audit rows.
var groupName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

func checkGroupName(name string) error {
	if len(name) == 0 || len(name) > groupNameMax || !groupName.MatchString(name) {
		return fx.Errorf(fx.EINVALID, "name must be 1 to %d letters, digits, '_', '.' or '-', starting with a letter or digit (got %q).", groupNameMax, name)
	}
	return nil
}

// checkAccountGroup checks g's terms as they will be written: each in its column's range, and
// marginCallLevel ≥ stopOutLevel ≥ 0 (the table's own check), so a refusal names the field
// instead of a constraint.
func (s *Admin) checkAccountGroup(g AccountGroup) error {
	if g.LeverageMax < leverageMaxLow || g.LeverageMax > leverageMaxTop {
		return fx.Errorf(fx.EINVALID, "leverageMax must be a whole number from %d to %d (got %d).", leverageMaxLow, leverageMaxTop, g.LeverageMax)
	}
	for _, f := range []struct {
		name string
		v    decimal.Decimal
	}{{"marginCallLevel", g.MarginCallLevel}, {"stopOutLevel", g.StopOutLevel}} {
		if f.v.IsNegative() || f.v.GreaterThan(levelColumnMax) || !f.v.Equal(f.v.Truncate(levelScale)) {
			return fx.Errorf(fx.EINVALID, "%s must be a percentage from 0 to %s with at most %d decimals (got %s).", f.name, levelColumnMax, levelScale, f.v)
		}
	}
	if g.MarginCallLevel.LessThan(g.StopOutLevel) {
		return fx.Errorf(fx.EINVALID, "marginCallLevel %s%% must be at least stopOutLevel %s%%: the trader is warned before positions are closed.", g.MarginCallLevel, g.StopOutLevel)
	}
	if g.Execution != fx.Internal && g.Execution != fx.External {
		return fx.Errorf(fx.EINVALID, "executionMode must be INTERNAL or EXTERNAL, not %q.", g.Execution)
	}
	if g.MaxPendingOrders != nil && (*g.MaxPendingOrders < maxPendingOrdersLow || *g.MaxPendingOrders > maxPendingOrdersTop) {
		return fx.Errorf(fx.EINVALID, "maxPendingOrders must be a whole number of orders from %d to %d, or null for the desk setting %s (got %d).",
			maxPendingOrdersLow, maxPendingOrdersTop, SettingMaxPendingOrders, *g.MaxPendingOrders)
	}
	if err := checkPositionMode(g); err != nil {
		return err
	}
	return s.checkVenue(g.Execution)
}

// checkVenue refuses EXTERNAL where no venue is configured (EUNAVAILABLE).
func (s *Admin) checkVenue(mode fx.ExecutionMode) error {
	if mode == fx.External && !s.venue {
		return fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): account groups cannot be EXTERNAL.")
	}
	return nil
}

// CreateAccountGroup creates account group name with the schema's defaults (leverage cap 500,
// margin call 100 %, stop-out 50 %, INTERNAL, not swap-free, negative balance protection on, the
// desk's pending-order cap) changed by p. A name in use is ECONFLICT; bad terms EINVALID.
func (s *Admin) CreateAccountGroup(ctx context.Context, name string, p AccountGroupPatch) (AccountGroup, error) {
	if err := checkGroupName(name); err != nil {
		return AccountGroup{}, err
	}
	g := p.apply(defaultAccountGroup(name))
	if err := s.checkAccountGroup(g); err != nil {
		return AccountGroup{}, err
	}
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("create account group: begin: %w", err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, "INSERT INTO `fx_account_group` ("+accountGroupCols+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			g.Name, g.LeverageMax, g.MarginCallLevel, g.StopOutLevel, g.Execution, g.SwapFreeDefault, g.NegativeBalanceProtection, g.MaxPendingOrders, g.PositionMode); err != nil {
			if store.IsDuplicateKey(err) {
				return fx.Errorf(fx.ECONFLICT, "Account group %q already exists.", name)
			}
			return fmt.Errorf("create account group %s: %w", name, err)
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "account_group.create", EntityType: "account_group", EntityID: name, After: g}); err != nil {
			return err
		}
		if err := store.Commit(tx); err != nil {
			return fmt.Errorf("create account group: commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return AccountGroup{}, err
	}
	s.cache.Invalidate()
	s.log.InfoContext(ctx, "account group created", slog.String("group", name))
	return g, nil
}

// UpdateAccountGroup changes account group name's terms, checked whole as they will be written.
// A change of execution mode is refused (ECONFLICT) while the group has open EXTERNAL positions
// or orders SENDING: they are closed through the venue they were opened at. The new margin terms
// apply at once: the holder's TermsFollower hands them to the risk engine from the audit row,
// and the engine re-marks the group's accounts at the next tick.
func (s *Admin) UpdateAccountGroup(ctx context.Context, name string, p AccountGroupPatch) (AccountGroup, error) {
	var before, after AccountGroup
	err := s.retry(ctx, func() (err error) {
		before, after, err = s.updateAccountGroup(ctx, name, p)
		return err
	})
	if err != nil {
		return AccountGroup{}, err
	}
	if equalGroups(before, after) {
		return after, nil
	}
	s.cache.Invalidate()
	s.log.InfoContext(ctx, "account group changed", slog.String("group", name), slog.Any("before", before), slog.Any("after", after))
	return after, nil
}

// updateAccountGroup is UpdateAccountGroup's transaction: the group as it was and is. Its
// accounts' terms reach the risk engine from the audit row (TermsFollower).
func (s *Admin) updateAccountGroup(ctx context.Context, name string, p AccountGroupPatch) (before, after AccountGroup, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return before, after, fmt.Errorf("update account group: begin: %w", err)
	}
	defer tx.Rollback()
	before, err = scanAccountGroup(tx.QueryRowContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group` WHERE `name` = ? FOR UPDATE", name))
	if errors.Is(err, sql.ErrNoRows) {
		return before, after, groupNotFound(name)
	}
	if err != nil {
		return before, after, fmt.Errorf("update account group %s: %w", name, err)
	}
	after = p.apply(before)
	if err := s.checkAccountGroup(after); err != nil {
		if after.Execution == before.Execution && fx.ErrorCode(err) == fx.EUNAVAILABLE {
			err = nil // a group left EXTERNAL by a desk that lost its venue may still have its levels changed
		}
		if err != nil {
			return before, after, err
		}
	}
	if after.Execution != before.Execution {
		if err := switchable(ctx, tx, name); err != nil {
			return before, after, err
		}
	}
	if after.PositionMode != before.PositionMode {
		if err := modeSwitchable(ctx, tx, name, before.PositionMode, after.PositionMode); err != nil {
			return before, after, err
		}
	}
	// A change to what the group already is writes nothing but its audit row: the admin's
	// request is on record either way.
	if !equalGroups(before, after) {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_account_group` SET `leverageMax` = ?, `marginCallLevel` = ?, `stopOutLevel` = ?, `executionMode` = ?, "+
			"`swapFreeDefault` = ?, `negativeBalanceProtection` = ?, `maxPendingOrders` = ?, `positionMode` = ? WHERE `name` = ?",
			after.LeverageMax, after.MarginCallLevel, after.StopOutLevel, after.Execution, after.SwapFreeDefault, after.NegativeBalanceProtection,
			after.MaxPendingOrders, after.PositionMode, name); err != nil {
			return before, after, fmt.Errorf("update account group %s: %w", name, err)
		}
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "account_group.update", EntityType: "account_group", EntityID: name, Before: before, After: after}); err != nil {
		return before, after, err
	}
	if err := store.Commit(tx); err != nil {
		return before, after, fmt.Errorf("update account group: commit: %w", err)
	}
	return before, after, nil
}

// equalGroups compares two groups' terms (decimals by value, the cap by what it points at).
func equalGroups(a, b AccountGroup) bool {
	capEq := (a.MaxPendingOrders == nil) == (b.MaxPendingOrders == nil) && (a.MaxPendingOrders == nil || *a.MaxPendingOrders == *b.MaxPendingOrders)
	return a.Name == b.Name && a.LeverageMax == b.LeverageMax && a.MarginCallLevel.Equal(b.MarginCallLevel) && a.StopOutLevel.Equal(b.StopOutLevel) &&
		a.Execution == b.Execution && a.SwapFreeDefault == b.SwapFreeDefault &&
		a.NegativeBalanceProtection == b.NegativeBalanceProtection && capEq && a.PositionMode == b.PositionMode
}

// switchable refuses (ECONFLICT) a change of group name's execution mode while it has open
// EXTERNAL positions or orders SENDING to the venue.
func switchable(ctx context.Context, tx *sql.Tx, name string) error {
	var positions, sending int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` "+
		"WHERE a.`accountGroup` = ? AND p.`status` = 'OPEN' AND p.`venueTradeId` IS NOT NULL", name).Scan(&positions); err != nil {
		return fmt.Errorf("set execution mode: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_order` o JOIN `fx_account` a ON a.`id` = o.`accountId` "+
		"WHERE a.`accountGroup` = ? AND o.`status` = 'SENDING'", name).Scan(&sending); err != nil {
		return fmt.Errorf("set execution mode: %w", err)
	}
	if positions > 0 || sending > 0 {
		return fx.Errorf(fx.ECONFLICT, "Account group %q has %d open EXTERNAL positions and %d orders SENDING to the venue: close them (or let the reconciler resolve them) before switching its execution mode.", name, positions, sending)
	}
	return nil
}

// SetExecutionMode routes account group name's orders to mode (UpdateAccountGroup with the mode
// alone). Switching a group that has open EXTERNAL positions or orders still SENDING is refused
// (ECONFLICT): they are closed through the venue they were opened at. Switching to EXTERNAL needs
// a venue (EUNAVAILABLE otherwise).
func (s *Admin) SetExecutionMode(ctx context.Context, name string, mode fx.ExecutionMode) (AccountGroup, error) {
	if mode != fx.Internal && mode != fx.External {
		return AccountGroup{}, fx.Errorf(fx.EINVALID, "executionMode must be INTERNAL or EXTERNAL, not %q.", mode)
	}
	if err := s.checkVenue(mode); err != nil {
		return AccountGroup{}, err
	}
	return s.UpdateAccountGroup(ctx, name, AccountGroupPatch{Execution: &mode})
}

// DeleteAccountGroup deletes account group name, which must hold no account (ECONFLICT naming
// how many it holds), and returns it as it was. The default group, where new accounts open,
// cannot be deleted.
func (s *Admin) DeleteAccountGroup(ctx context.Context, name string) (AccountGroup, error) {
	if name == DefaultAccountGroup {
		return AccountGroup{}, fx.Errorf(fx.ECONFLICT, "Account group %q is where new accounts open: it cannot be deleted.", name)
	}
	var deleted AccountGroup
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("delete account group: begin: %w", err)
		}
		defer tx.Rollback()
		g, err := scanAccountGroup(tx.QueryRowContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group` WHERE `name` = ? FOR UPDATE", name))
		if errors.Is(err, sql.ErrNoRows) {
			return groupNotFound(name)
		}
		if err != nil {
			return fmt.Errorf("delete account group %s: %w", name, err)
		}
		// A move into the group takes the group's row in share mode (the foreign key), so it
		// waits for this lock and then fails on the deleted row rather than slipping in.
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_account` WHERE `accountGroup` = ?", name).Scan(&n); err != nil {
			return fmt.Errorf("delete account group %s: %w", name, err)
		}
		if n > 0 {
			return fx.Errorf(fx.ECONFLICT, "Account group %q still holds %d accounts: move them to another group before deleting it.", name, n)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM `fx_account_group` WHERE `name` = ?", name); err != nil {
			if store.IsReferenced(err) {
				return fx.Errorf(fx.ECONFLICT, "Account group %q is still referenced (its symbol overrides or routing rules): remove them before deleting it.", name)
			}
			return fmt.Errorf("delete account group %s: %w", name, err)
		}
		if err := audit.Record(ctx, tx, audit.Change{Action: "account_group.delete", EntityType: "account_group", EntityID: name, Before: g}); err != nil {
			return err
		}
		if err := store.Commit(tx); err != nil {
			return fmt.Errorf("delete account group: commit: %w", err)
		}
		deleted = g
		return nil
	})
	if err != nil {
		return AccountGroup{}, err
	}
	s.cache.Invalidate()
	s.log.InfoContext(ctx, "account group deleted", slog.String("group", name))
	return deleted, nil
}

// DefaultAccountGroup is where every new account opens.
const DefaultAccountGroup = "default"
