// Package book owns the desk's book as rows — accounts, orders, positions and deals, their
// columns, scans and reads — and the group commit that changes them (docs/architecture.md,
// «Group commit»).
//
// The group commit (Committer) is a part with a lifecycle: Run takes batches until its context
// ends, then commits what is queued and returns. A Write tells the engine what it needs — the
// rows to lock (Wants, into a Plan), its account (LockedAccount), whether it may go in one round
// trip on remembered rows (OneTrip) — and decides on the locked Rows (Apply); the engine never
// looks at a write's concrete type. A batch is two round trips (Batch, Txn): START TRANSACTION,
// the row locks and the reads; then the writes, the lease fence and COMMIT. A batch of market
// fills on remembered B-book accounts is one round trip, its rules run on the remembered rows
// and checked under the accounts' locks (StaleCheck) before anything is written. Every batch's
// postings go through internal/ledger, the one writer of money. A rule that needs an account's
// open exposures only now and then asks for them on the rows (Rows.OpenExposures): a batch that did
// not read them is rolled back with nothing written and planned again with them read.
//
// Market is one batch's (or one request's) view of prices: a quote is read once per symbol, and
// money is converted through the USD hub and marked with the account's metrics. Converter is the
// same view for the scheduled jobs.
//
// This package decides no trading rule: whether an order fills, at what price, whether a close
// is allowed, is internal/trading's, run on the rows this package locked. It must never commit a
// batch without the fence as its last statement before COMMIT, never answer a write before its
// batch committed or failed, and never run a batch again after its COMMIT may have gone out.
package book
