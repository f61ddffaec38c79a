// Package fix is the desk's FIX 4.4 venue (FXDESK_VENUE=fix; docs/fix.md): a QuickFIX/Go
// initiator whose message store (store.go) is in MySQL, so that sequence numbers survive a
// restart and a takeover (the new lease holder resumes the session, it never resets it), and an
// adapter that gives the desk the same venue.API the REST venue does, so that trading, the
// reconciler's Plan and the hedge monitor read a FIX venue exactly as they read OANDA.
//
// A FIX venue nets: it holds one position per symbol. The desk hedges: each EXTERNAL position is
// a trade of its own. The adapter keeps the desk's trades over the venue's net in a journal
// (fx_fix_order, fx_fix_execution, fx_fix_allocation): a trade is the opening order, its id the
// order's ClOrdID (the desk's order id); a close is an opposite market order whose ClOrdID names
// the trade it reduces, one at a time (a netting venue would execute a second close of the same
// trade and flip it); an execution the venue made on its own (a venue-side close) is allocated
// to the desk's trades in that symbol oldest first; whatever of the venue's net position the
// desk's trades do not explain is reported as an untagged trade, which the desk never touches.
//
// The session's writer is the executor: a send is one message written to the one open session,
// no worker pool and no connection per call. Between a close's trigger and its write there is no
// database read — the holder keeps the trades in memory (trades.go), loaded from the journal when
// the session starts — and one commit shared with the closes decided with it (identity.go); the
// reports are journaled in batches (intake.go). A send whose report does not come is never sent
// again by the desk: the library resends what the venue asks for (the same ClOrdID, which the
// venue executes once), and the reconciler resolves the rest with OrderStatusRequest by ClOrdID.
// Queries (status, mass status, positions) are read-only and are asked again each patience
// without an answer until their timeout (query.go); orders never are.
//
// This package must never write the desk's book (orders, positions, deals): only its own
// journal and the session's store (store.go). It must never log on unless its caller holds the
// lease.
package fix
