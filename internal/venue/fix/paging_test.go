package fix_test

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// NZDJPY is this test's own symbol: the journal is the whole database's.
//
// Execution ids have gaps — a journal batch rolled back, a Galera cluster's auto-increment
// stride — and the transaction pages walk past them: the page after an execution holds the next
// executions by count, so one 1,500 ids further on is in it, not lost behind an empty id range.
func TestTransactionsSincePagesPastAGapOfExecutionIDs(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	before := place(t, r.session, orderID(), "NZDJPY", "10000")
	var next int64
	if err := testDB.QueryRow("SELECT COALESCE(MAX(`id`), 0) + 1500 FROM `fx_fix_execution`").Scan(&next); err != nil {
		t.Fatal(err)
	}
	// What a rolled-back batch of 1,500 executions leaves: ids nothing has.
	if _, err := testDB.Exec("ALTER TABLE `fx_fix_execution` AUTO_INCREMENT = " + strconv.FormatInt(next, 10)); err != nil {
		t.Fatal(err)
	}
	after := place(t, r.session, orderID(), "NZDJPY", "-10000")
	if after.TransactionID-before.TransactionID <= 1000 {
		t.Fatalf("executions %d and %d are not a page apart; the test needs a gap", before.TransactionID, after.TransactionID)
	}
	txs, last, err := r.session.TransactionsSince(ctx, before.TransactionID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tx := range txs {
		found = found || tx.ID == after.TransactionID
	}
	if !found || last < after.TransactionID {
		t.Fatalf("the page after execution %d holds %d transactions (last %d) and not execution %d past the gap", before.TransactionID, len(txs), last, after.TransactionID)
	}
}
