// Package hedger keeps the desk's net exposure per symbol inside the dealer's limits
// (docs/routing.md, «The hedger»). Decide is a pure function of one symbol's state: the B-book's
// exposure (the desk's side of its INTERNAL client positions), the hedge book at the venue, the
// symbol's limit, the hysteresis band and the minimum hedge size. It returns at most one venue
// order: a hedge Open that brings the net back to the limit less the band, or the Close of one
// whole hedge position the exposure no longer needs.
//
// The Runner runs on the lease holder only. It wakes on every committed change of a position
// (Notify) and on a slow timer, passes the gate, reads the state, asks Decide, and sends through
// the hedge book, which writes the hedge order's identity row before the request leaves. One
// symbol's failure does not stop the others; a symbol the hedger could not bring inside its
// limit raises exposure-limit-breached, resolved when every limited symbol is back inside.
//
// The hedger must never send while an earlier hedge order of the symbol has an unknown outcome
// (a SENDING row): the reconciler resolves it from the venue, and only then does the hedger
// decide again. It never touches a hedge position a routing rule opened (HEDGE n%), only its own,
// and it never hedges a symbol without a limit.
package hedger
