// Package audit owns the dealer's audit log (fx_audit): one row per admin write — instruments,
// groups and overrides, settings, deposits, account moves and states, dealer actions, execution
// modes, tokens — written in the same transaction as the change it describes, so a change
// without its row, or a row without its change, cannot be committed.
//
// The actor travels in the request's context (WithActor, set by the API after authentication,
// or by the command line): the token and its user, the way in ("api", "cli") and the request id.
// Row builds the INSERT for a change; the writer adds it to its own transaction (Record on a
// *sql.Tx or a connection, or the statement into a batch). List reads the log back with filters.
//
// ArchiveTask moves rows past FXDESK_AUDIT_RETENTION to fx_audit_archive, a batch per
// transaction, deleting from the log exactly the rows the archive then holds (docs/operations.md,
// «Retention»).
//
// It must never update a row, nor delete one but by that move: the log is append-only, and a
// test fails on any SQL in the module that writes fx_audit other than this package's INSERT and
// its archive's DELETE.
package audit
