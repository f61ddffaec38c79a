// Package venue is the desk's connection to an execution venue (A-book; docs/architecture.md,
// «A-book execution and the reconciler»): a client of the OANDA v20 REST subset the desk needs, and
// the executor that runs its blocking calls on workers and connections sized before a burst.
//
// The desk writes an order's identity before the venue sees it: every order carries
// clientExtensions and tradeClientExtensions with id = the desk's order id and tag = "fxdesk",
// so the venue, not the desk's database, is the record of what was sent. The client therefore
// never re-sends: an answer it cannot read (a timeout, a reset connection, a 5xx) is returned as
// ErrOutcomeUnknown, and the reconciler resolves that order later by its client id.
//
// This package must never write the desk's database, and never decide whether this process may
// act: the caller passes the gate before a send starts.
package venue
