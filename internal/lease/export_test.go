package lease

import (
	"context"
	"database/sql"
	"fmt"
)

// Fence sends FenceStatement alone inside tx, for the tests of the statement itself: nil when
// the fence holds (the row stays share-locked until tx ends), ErrFenced when the write must not
// happen.
func (k *Keeper) Fence(ctx context.Context, tx *sql.Tx) error {
	stmt, args, err := k.FenceStatement()
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
		if IsFenced(err) {
			return ErrFenced
		}
		return fmt.Errorf("lease fence: %w", err)
	}
	return nil
}

// Contend runs one standby claim, as Run does every TTL/3 on a standby follower.
func (k *Keeper) Contend(ctx context.Context) bool { return k.contend(ctx) }
