// Package trading owns the desk's trading rules — accounts, orders, positions, and when the
// deals ledger is posted (docs/architecture.md, «Money and the ledger»; internal/ledger writes
// it) — as decisions over rows internal/book locked, and the A-book desk side: what is sent to
// the execution venue and how its answers are booked.
//
// Every fill and close is one transaction that locks the account row, then the position or
// order row — always in that order, so two writers never wait on each other in a cycle — and
// that checks the engine lease term (Lease.FenceStatement, a shared lock on the lease row) as
// its last statement before COMMIT. A renew or a claim, which lock only the lease row, wait for
// commits in flight rather than for whole transactions. A process that lost the term while its
// gate still trusts its lease (the moments before its trust window ends) therefore runs the
// rules first, and may answer a rule's refusal (unknown position, margin) rather than the
// pricing text the fence would give; either way nothing is written. Every balance change
// is posted through the ledger (internal/ledger) as a deal with balanceAfter and a unique
// idempotency key, its statements joining the same batch, so Σ deals.amount = balance holds
// after every commit.
//
// The holder's fills and closes are group-committed (internal/book's Committer): each is a
// book.Write whose rules run in Go on the rows its batch locked (or, for a market fill on a
// remembered B-book account, on the remembered rows, checked before any write). A close leaves the
// account's stored equity and used margin to the next mark (a fill on the account, or the marks
// job); a fill writes them.
//
// Row order alone does not rule deadlocks out: a statement may reach a row through a secondary
// index while another transaction, holding the row, waits to change that index (a SL/TP change
// racing a close). Every transaction a request runs outside the group commit — and the group
// commit's own batches — is therefore run again whole when the server rolls it back
// (Service.retry, store.RetryRolledBack), and past the retries answered EUNAVAILABLE, never as
// an internal error.
//
// Each order is routed once, at acceptance, on its locked account (routing.go): its account
// group's routing rules, read with the catalog, and the trader's profile decide INTERNAL or
// EXTERNAL, and the order records the rule. Every close adds its trade to the account's profile
// in its own transaction (profile.go), one statement per close.
//
// Instruments, groups and the caps are read from internal/catalog, which the dealer changes;
// this package never writes them. The doors a trader opens are bounded by the settings: resting
// orders per account and accounts per user, each counted under the lock its placement or
// creation takes. A resting order must fit
// the account's free margin at placement. A requestNonce binds its request: an order's
// fingerprint (fx_order.requestHash), a deposit's or withdrawal's amount; another request under
// it is refused (EKEYREUSED) wherever the first is found.
//
// Money is exact: amounts are shopspring decimals, converted through the USD hub as one
// multiplication and one division, and rounded once to the account currency's ISO 4217 minor
// units (fx.RoundMoney: whole yen, cents, fils) before they are marked or written.
//
// This package must never fill or close at a price it does not hold: a process with no fresh
// quote for a symbol (a follower, or a holder whose stream went stale) refuses with the exact
// texts traders and tests rely on, and a process that lost the lease refuses at the fence.
package trading
