// Package tick owns the desk's one price stream: a single provider websocket (Massive/Polygon
// forex quote protocol), the in-process map of last quotes that every conversion and order gate
// reads, the symbol states QUOTING / QUOTING_HALTED / MARKET_CLOSED, and the fan-out of price
// updates to in-process consumers (the markets rail, the risk engine).
//
// Shape of the engine:
//
//	callers ──SetSource/Subscribe──▶ wanted set ──(live subscribe/unsubscribe)──▶ provider socket
//	provider socket ──frames──▶ Decoder.Decode ──Validate──▶ last-quote slots ──▶ Updates subscribers
//	                                              └──rejected: counted by reason, never stored
//
// Run dials, authenticates, subscribes the whole wanted set and reads until the socket fails or
// goes silent (connected, but no accepted quote for longer than Config.SilenceAfter while at
// least one wanted symbol's session is open); then it waits a capped, jittered exponential
// backoff and does it again, until its context ends. The wanted set changes on the live socket
// without reconnecting.
//
// LastTick is lock-free and allocation-free: a copy-on-write index (behind an atomic pointer)
// maps each symbol to a slot holding an atomic pointer to its latest Quote. Only the reader
// goroutine writes slots; index changes (new symbols) are rare and serialised by a mutex.
//
// The engine must never store a quote it cannot date (missing or non-positive provider time),
// with a non-positive or non-finite bid or ask, or crossed (bid > ask); never block its reader on
// a slow Updates subscriber (the subscriber loses updates, counted, instead); never read the
// wall clock where Config.Now should decide; never decide which symbols are wanted (callers
// pass named sources: enabled instruments, exposed symbols, pinned conversion legs); and never
// know about the lease, accounts or orders.
package tick
