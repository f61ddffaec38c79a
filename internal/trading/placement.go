package trading

import (
	"context"
	"database/sql"

	"fxdesk/internal/book"
)

// placement is what a resting placement (placeResting, placeOCO) reads in its first round trip,
// under the account's lock.
type placement struct {
	a        book.Account
	found    bool
	original book.Order // the order a retried nonce names
	retried  bool
	exps     []book.Exposure // the account's open exposures
	pending  int64           // the account's PENDING orders
}

// lockPlacement sends a resting placement's first round trip on tx: it locks account accountID
// and reads, under that lock, the order a retried nonce names, the open exposures and the
// pending orders. The account lock serialises submits of one account, so a retry racing the
// original waits for it and then finds it here, before any rule could refuse the retry; and
// every placement that committed a PENDING order of the account before it is counted, so two
// placements racing for the last place cannot both pass the cap.
func lockPlacement(ctx context.Context, tx *book.Txn, locks *book.Batch, accountID int64, nonce, what string) (*placement, error) {
	p := &placement{}
	locks.Query(book.RowInto(&p.a, &p.found, book.ScanAccount), book.LockAccountSQL, accountID)
	if nonce != "" {
		locks.Query(book.RowInto(&p.original, &p.retried, book.ScanOrder), book.NonceSQL, accountID, nonce)
	}
	locks.Query(book.ExposuresInto(&p.exps), book.ExposuresSQL, accountID)
	locks.Query(book.ScanFirst(new(bool), func(rows *sql.Rows) error { return rows.Scan(&p.pending) }),
		"SELECT COUNT(*) FROM `fx_order` WHERE `accountId` = ? AND `status` = 'PENDING'", accountID)
	if err := tx.Lock(ctx, locks, what); err != nil {
		return nil, err
	}
	return p, nil
}
