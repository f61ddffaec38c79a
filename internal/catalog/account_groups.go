package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// Account groups and their execution mode.

// AccountGroups lists the account groups with their execution mode.
func (s *Admin) AccountGroups(ctx context.Context) ([]AccountGroup, error) {
	return store.QueryAll(ctx, s.db, "account groups", scanAccountGroup, "SELECT "+accountGroupCols+" FROM `fx_account_group` ORDER BY `name`")
}

// SetExecutionMode routes account group name's orders to mode. Switching a group that has open
// EXTERNAL positions or orders still SENDING is refused (ECONFLICT): they are closed through the
// venue they were opened at. Switching to EXTERNAL needs a venue (EUNAVAILABLE otherwise).
func (s *Admin) SetExecutionMode(ctx context.Context, name string, mode fx.ExecutionMode) (AccountGroup, error) {
	if mode != fx.Internal && mode != fx.External {
		return AccountGroup{}, fx.Errorf(fx.EINVALID, "executionMode must be INTERNAL or EXTERNAL, not %q.", mode)
	}
	if mode == fx.External && !s.venue {
		return AccountGroup{}, fx.Errorf(fx.EUNAVAILABLE, "No execution venue is configured on this desk (FXDESK_VENUE): account groups cannot be EXTERNAL.")
	}
	var g AccountGroup
	var from fx.ExecutionMode
	err := s.retry(ctx, func() (err error) {
		g, from, err = s.setExecutionMode(ctx, name, mode)
		return err
	})
	if err != nil {
		return AccountGroup{}, err
	}
	if from != mode {
		s.cache.Invalidate()
		s.log.InfoContext(ctx, "account group execution mode changed", slog.String("group", name), slog.String("from", string(from)), slog.String("to", string(mode)))
	}
	return g, nil
}

// setExecutionMode is SetExecutionMode's transaction; from is the mode the group had. It records
// one audit row (account_group.execution_mode), the group before and after, also when the group
// already had mode: the log answers who asked for what, not only what moved.
func (s *Admin) setExecutionMode(ctx context.Context, name string, mode fx.ExecutionMode) (AccountGroup, fx.ExecutionMode, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return AccountGroup{}, "", fmt.Errorf("set execution mode: begin: %w", err)
	}
	defer tx.Rollback()
	g, err := scanAccountGroup(tx.QueryRowContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group` WHERE `name` = ? FOR UPDATE", name))
	if errors.Is(err, sql.ErrNoRows) {
		return AccountGroup{}, "", fx.Errorf(fx.ENOTFOUND, "Account group %q not found.", name)
	}
	if err != nil {
		return AccountGroup{}, "", fmt.Errorf("set execution mode: %w", err)
	}
	before := g
	if before.Execution != mode {
		if err := checkNoVenueState(ctx, tx, name); err != nil {
			return AccountGroup{}, "", err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_account_group` SET `executionMode` = ? WHERE `name` = ?", mode, name); err != nil {
			return AccountGroup{}, "", fmt.Errorf("set execution mode: %w", err)
		}
	}
	g.Execution = mode
	if err := audit.Record(ctx, tx, audit.Change{Action: "account_group.execution_mode", EntityType: "account_group", EntityID: name,
		Before: recordGroup(before), After: recordGroup(g)}); err != nil {
		return AccountGroup{}, "", err
	}
	if err := tx.Commit(); err != nil {
		return AccountGroup{}, "", fmt.Errorf("set execution mode: commit: %w", err)
	}
	return g, before.Execution, nil
}

// checkNoVenueState refuses (ECONFLICT) to switch group name's execution mode while it has open
// EXTERNAL positions or orders still SENDING: they are closed through the venue they were
// opened at.
func checkNoVenueState(ctx context.Context, tx *sql.Tx, name string) error {
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
