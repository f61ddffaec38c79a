package fix

import (
	"context"
	"database/sql"
	"fmt"
)

// pageEnd is the id of the n-th execution after id that allocated units to desk trades (the
// last such execution when fewer follow; id when none does): the page (id, pageEnd] holds n
// executions whatever gaps their ids have.
func (j *journal) pageEnd(ctx context.Context, id int64, n int) (int64, error) {
	var end sql.NullInt64
	err := j.db.QueryRowContext(ctx, "SELECT MAX(p.`executionId`) FROM (SELECT DISTINCT `executionId` FROM `fx_fix_allocation` "+
		"WHERE `executionId` > ? ORDER BY `executionId` LIMIT ?) p", id, n).Scan(&end)
	if err != nil {
		return 0, fmt.Errorf("journal page of executions after %d: %w", id, err)
	}
	if !end.Valid {
		return id, nil
	}
	return end.Int64, nil
}
