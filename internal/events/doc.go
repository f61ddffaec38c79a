// Package events owns the desk's events outbox (fx_event): one row per change a trader or the
// host platform is told of — an order accepted, rejected, filled, triggered, cancelled or
// expired, a position opened, modified or closed, a stop-out, a margin call and its end, a swap
// charged, a deposit, a withdrawal or an adjustment (Types) — written in the same transaction as
// the change it describes, by the writer that commits it (the group commit, the ledger's balance
// changes, the expiry and rollover jobs, the margin call's record), so a change without its
// event, or an event without its change, cannot be committed.
//
// Add puts an event into the writer's own batch, and Record into its transaction, as the writer
// adds its audit row. The payload's bytes are encoding/json's, the one form every reader serves;
// ids the batch learns only as it runs (a new order's, a new position's) are spliced into them as
// text from the session variables that hold them, so the server never renders the JSON. List
// reads a page of events back in id order (for a caller's page, a stream's backlog, a web
// process's one reader of the log); Newest is the highest id. Ids are dense and given in commit
// order, so a reader resuming after the last id it read misses nothing (docs/architecture.md,
// «Events»).
//
// It must never update a row, nor delete one but through Prune, the retention (events older than
// FXDESK_EVENTS_RETENTION that every consumer has relayed; docs/events.md): the outbox is
// append-only, and a test fails on any other SQL in the module that writes fx_event.
package events
