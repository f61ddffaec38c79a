// Package execution owns the reconciler of the desk's A-book business (docs/architecture.md,
// «A-book execution and the reconciler»): Plan compares what the venue holds (open trades, lookups
// by trade id and by client id) with what the desk booked (open EXTERNAL positions, SENDING orders)
// and returns the actions that repair the difference — adopt a tagged trade the desk did not link,
// resolve a SENDING order by its client id, close a tagged orphan, close the desk side of a trade
// the venue closed, book a partial close nobody booked, report untagged exposure.
//
// Plan is a pure function of the two states. The venue, not the desk's database, is the record of
// what was sent: every desk order carries its id and the tag "fxdesk", so a trade can always be
// matched back to the order that opened it.
//
// Plan must never plan an order that opens a trade: an order whose outcome is unknown is found by
// its client id or, past a threshold, marked NOT_SENT — never re-sent. It must never act on a trade
// without the desk's tag (it is only reported), never book a price the venue did not report, and
// never depend on history: work dropped while the desk was unsure is not replayed, the next plan
// repairs from state.
package execution
