// Package hedge is the desk's hedge book (docs/routing.md, «Hedge book»): the desk's own
// positions at the venue, opened for a HEDGE n% routing rule's share of a client's trade or by
// the hedger to keep net exposure inside its limits. It owns fx_hedge_order and
// fx_hedge_position and the venue client id convention that tells hedge trades from client
// trades: "H<hedge order id>" (ClientID), where a client order's client id is its bare number.
//
// What it must never do: touch a trader's account, position, order or ledger (no fx_deal rows,
// no balance), send a hedge order twice (an unknown outcome stays SENDING and is resolved by the
// execution reconciler through the client id), or send anything off the lease holder (every send
// passes the gate, gate.VenueSend, and the identity row is written under the lease's fence).
//
// Book is the API: Open, Close and Net for the hedger and for the HEDGE n% rules, Reduce for the
// rules, and the reads and bookings the reconciler and the hedge monitor use. Rules drives
// HEDGE n% from durable state on the holder: client positions routed HEDGE without their hedge,
// hedges larger than their share of what is left of a partly closed client position, and hedges
// whose client position closed.
package hedge
