package catalog

import (
	"context"
	"database/sql"
	"fmt"

	"fxdesk/internal/fx"
)

// Account groups' position modes (docs/orders.md, «Position modes»): HEDGING, NETTING or FIFO.

// checkPositionMode refuses a mode the desk does not know, and NETTING or FIFO on an EXTERNAL
// group: the venue holds one trade per desk position, and a netting add or a FIFO close spread
// over several positions has no single venue trade to act on. Keeping the A-book hedging-only is
// the simplest rule that cannot leave the desk and the venue disagreeing.
func checkPositionMode(g AccountGroup) error {
	if !g.PositionMode.Valid() {
		return fx.Errorf(fx.EINVALID, "positionMode must be HEDGING, NETTING or FIFO, not %q.", g.PositionMode)
	}
	if g.PositionMode != fx.Hedging && g.Execution == fx.External {
		return fx.Errorf(fx.ECONFLICT, "Account group %q is EXTERNAL (the venue fills its orders, one venue trade per position): it can only be HEDGING, not %s.", g.Name, g.PositionMode)
	}
	return nil
}

// modeSwitchable refuses (ECONFLICT) a change of group name's position mode while any of its
// accounts holds an open position: a NETTING account with two positions on one symbol, or a FIFO
// account holding both sides, is a state no rule of the new mode knows how to trade. Resting
// orders may stay: each fills under the mode in force when it triggers.
func modeSwitchable(ctx context.Context, tx *sql.Tx, name string, from, to fx.PositionMode) error {
	var positions, accounts int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT p.`accountId`) FROM `fx_position` p JOIN `fx_account` a ON a.`id` = p.`accountId` "+
		"WHERE a.`accountGroup` = ? AND p.`status` = 'OPEN'", name).Scan(&positions, &accounts); err != nil {
		return fmt.Errorf("set position mode: %w", err)
	}
	if positions > 0 {
		return fx.Errorf(fx.ECONFLICT, "Account group %q is %s and its accounts hold %d open positions (%d accounts): close them before switching it to %s.",
			name, from, positions, accounts, to)
	}
	return nil
}

// errModeMove refuses to move an account that holds open positions between groups of different
// position modes, for modeSwitchable's reason.
func errModeMove(id int64, positions int, from string, fromMode fx.PositionMode, to string, toMode fx.PositionMode) error {
	return fx.Errorf(fx.ECONFLICT, "Account %d has %d open positions, and %q is %s while %q is %s: close them before moving it.",
		id, positions, from, fromMode, to, toMode)
}
