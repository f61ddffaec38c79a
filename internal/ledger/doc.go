// Package ledger is the desk's one writer of money: the only code that inserts `fx_deal` rows and
// moves `fx_account.balance` (docs/architecture.md, «Money and the ledger»: one row per balance
// change, a unique idempotency key, balanceAfter, Σ deal amounts = balance).
//
// It owns no transaction. Post computes the rows — each amount rounded once to the account's
// money, each balanceAfter in order within its account — and returns the statements that write
// them; the caller sends them in the transaction that holds the accounts' row locks: trading's
// batched multi-statement transaction (the statements join its round trip) or a database/sql Tx
// (Posting.Exec). However many deals a posting carries, it is one multi-row INSERT, after one
// UPDATE per 50 accounts it moves (a CASE is quadratic on the server: see maxCase) — two
// statements for a fill's or a close's batch.
//
// The package never takes locks, begins or commits, and never decides whether a balance change
// is allowed (funds, margin, the lease): its callers do, under their locks. A test in this
// package fails when SQL writing `fx_deal` or `fx_account`.`balance` appears in any other
// package's sources.
package ledger
