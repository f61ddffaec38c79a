package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"fxdesk/internal/audit"
	"fxdesk/internal/fx"
	"fxdesk/internal/store"
)

// The dealer's hold on one account: which group it is in, and what its state lets it do.

// accountPlacement is what an admin change reads of an account, and its audit row records.
type accountPlacement struct {
	ID          int64           `json:"id"`
	Group       string          `json:"group"`
	State       fx.AccountState `json:"state"`
	StateReason *string         `json:"stateReason"`
}

// lockAccount reads account id for update (ENOTFOUND when there is none). The trading rules take
// the same row lock, so a move or a state change lands between two orders, never inside one.
func lockAccount(ctx context.Context, tx *sql.Tx, id int64) (accountPlacement, error) {
	a := accountPlacement{ID: id}
	err := tx.QueryRowContext(ctx, "SELECT `accountGroup`, `state`, `stateReason` FROM `fx_account` WHERE `id` = ? FOR UPDATE", id).
		Scan(&a.Group, &a.State, &a.StateReason)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fx.Errorf(fx.ENOTFOUND, "Account %d not found.", id)
	}
	if err != nil {
		return a, fmt.Errorf("account %d: %w", id, err)
	}
	return a, nil
}

// MoveAccount puts account id in account group group. The new group's margin terms apply at
// once (the holder's TermsFollower hands the account's group and terms to the risk engine from
// the audit row, and the engine re-marks it at the next tick) and its routing to the next order
// (the trading rules read the group's execution mode with the locked account).
//
// A move between groups of one execution mode is allowed with open positions and resting orders:
// they stay as they are and are judged, closed and charged under the new group from now on. A
// move that changes the execution mode is refused (ECONFLICT) while the account has open
// positions or orders PENDING: an INTERNAL position must not be left in a group whose closes the
// venue makes, nor a venue trade in one the desk fills. Any move waits (ECONFLICT) while an order
// is SENDING to the venue, whose outcome is not known yet. A move into an EXTERNAL group where no
// venue is configured is refused (EUNAVAILABLE): its orders could not be routed.
func (s *Admin) MoveAccount(ctx context.Context, id int64, group string) error {
	var before, after accountPlacement
	err := s.retry(ctx, func() (err error) {
		before, after, _, err = s.moveAccount(ctx, id, group)
		return err
	})
	if err != nil {
		return err
	}
	if before.Group != after.Group {
		s.log.InfoContext(ctx, "account moved", slog.Int64("account_id", id), slog.String("from", before.Group), slog.String("to", after.Group))
	}
	return nil
}

func (s *Admin) moveAccount(ctx context.Context, id int64, group string) (before, after accountPlacement, to AccountGroup, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return before, after, to, fmt.Errorf("move account: begin: %w", err)
	}
	defer tx.Rollback()
	if before, err = lockAccount(ctx, tx, id); err != nil {
		return before, after, to, err
	}
	// The group rows in share mode: neither can be deleted or switched under the move.
	groups := map[string]AccountGroup{}
	rows, err := tx.QueryContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group` WHERE `name` IN (?, ?) LOCK IN SHARE MODE", before.Group, group)
	if err != nil {
		return before, after, to, fmt.Errorf("move account %d: %w", id, err)
	}
	for rows.Next() {
		g, err := scanAccountGroup(rows)
		if err != nil {
			rows.Close()
			return before, after, to, fmt.Errorf("move account %d: %w", id, err)
		}
		groups[g.Name] = g
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return before, after, to, fmt.Errorf("move account %d: %w", id, err)
	}
	to, ok := groups[group]
	if !ok {
		return before, after, to, groupNotFound(group)
	}
	from := groups[before.Group]
	if to.Execution == fx.External && !s.venue {
		return before, after, to, fx.Errorf(fx.EUNAVAILABLE, "Account group %q is EXTERNAL and no execution venue is configured on this desk (FXDESK_VENUE): its orders could not be routed. Account %d stays in %q.", group, id, before.Group)
	}
	after = before
	after.Group = group
	if before.Group != group {
		var positions, pending, sending int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_position` WHERE `accountId` = ? AND `status` = 'OPEN'", id).Scan(&positions); err != nil {
			return before, after, to, fmt.Errorf("move account %d: %w", id, err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(`status` = 'PENDING'), 0), COALESCE(SUM(`status` = 'SENDING'), 0) FROM `fx_order` "+
			"WHERE `accountId` = ? AND `status` IN ('PENDING', 'SENDING')", id).Scan(&pending, &sending); err != nil {
			return before, after, to, fmt.Errorf("move account %d: %w", id, err)
		}
		if sending > 0 {
			return before, after, to, fx.Errorf(fx.ECONFLICT, "Account %d has %d orders SENDING to the venue: it can change group once their outcome is booked.", id, sending)
		}
		if from.Execution != to.Execution && positions+pending > 0 {
			return before, after, to, fx.Errorf(fx.ECONFLICT, "Account %d has %d open positions and %d pending orders, and %q is %s while %q is %s: "+
				"close and cancel them before moving it, because positions stay with the execution they were opened at.",
				id, positions, pending, before.Group, from.Execution, group, to.Execution)
		}
		if from.PositionMode != to.PositionMode && positions > 0 {
			return before, after, to, errModeMove(id, positions, before.Group, from.PositionMode, group, to.PositionMode)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_account` SET `accountGroup` = ? WHERE `id` = ?", group, id); err != nil {
			return before, after, to, fmt.Errorf("move account %d to %s: %w", id, group, err)
		}
	}
	if err := audit.Record(ctx, tx, audit.Change{Action: "account.move", EntityType: "account", EntityID: fmt.Sprint(id), Before: before, After: after}); err != nil {
		return before, after, to, err
	}
	if err := store.Commit(tx); err != nil {
		return before, after, to, fmt.Errorf("move account: commit: %w", err)
	}
	return before, after, to, nil
}

// stateReasonMax is fx_account.stateReason's width in characters.
const stateReasonMax = 255

// SetAccountState sets account id's state. CLOSE_ONLY and DISABLED need a reason (at most 255
// characters), which every refusal they cause names; ACTIVE clears it. The trading rules read the
// state on the locked account row, so it applies to the next order, close or withdrawal.
func (s *Admin) SetAccountState(ctx context.Context, id int64, state fx.AccountState, reason string) error {
	if !state.Valid() {
		return fx.Errorf(fx.EINVALID, "state must be ACTIVE, CLOSE_ONLY or DISABLED, not %q.", state)
	}
	if state != fx.AccountActive && strings.TrimSpace(reason) == "" {
		return fx.Errorf(fx.EINVALID, "reason is required for %s: the trader is told it with every refusal.", state)
	}
	if utf8.RuneCountInString(reason) > stateReasonMax {
		return fx.Errorf(fx.EINVALID, "reason must be at most %d characters.", stateReasonMax)
	}
	var before, after accountPlacement
	err := s.retry(ctx, func() error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("set account state: begin: %w", err)
		}
		defer tx.Rollback()
		if before, err = lockAccount(ctx, tx, id); err != nil {
			return err
		}
		after = before
		after.State, after.StateReason = state, nil
		if state != fx.AccountActive {
			after.StateReason = &reason
		}
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_account` SET `state` = ?, `stateReason` = ? WHERE `id` = ?", after.State, after.StateReason, id); err != nil {
			return fmt.Errorf("set account %d state: %w", id, err)
		}
		// ACTIVE keeps no reason on the row; the audit row keeps the one the admin gave.
		logged := struct {
			accountPlacement
			Reason string `json:"reason,omitempty"`
		}{after, reason}
		if err := audit.Record(ctx, tx, audit.Change{Action: "account.state", EntityType: "account", EntityID: fmt.Sprint(id), Before: before, After: logged}); err != nil {
			return err
		}
		if err := store.Commit(tx); err != nil {
			return fmt.Errorf("set account state: commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "account state set", slog.Int64("account_id", id), slog.String("from", string(before.State)), slog.String("to", string(state)), slog.String("reason", reason))
	return nil
}
