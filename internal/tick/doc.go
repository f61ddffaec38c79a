// Package tick owns the desk's prices: several price sources in priority order (the provider
// websocket, FIX market data, simulators — each a Source with its own connection), per-symbol
// selection of one active source with failover and hold-down fail-back, a spike filter in front
// of publication, the in-process map of last published quotes that every conversion and order
// gate reads, the symbol states QUOTING / QUOTING_HALTED / MARKET_CLOSED, and the fan-out of
// published prices to in-process consumers (the markets rail, the risk engine). docs/prices.md
// describes selection and the filter.
//
// Shape of the engine:
//
//	callers ──SetSource/Subscribe──▶ wanted set ──(Feed.Wanted/WantedChanged)──▶ every Source
//	Source ──Feed.Offer──▶ Validate ──▶ per-symbol state (mutex): health, selection, filter
//	         └──rejected: counted by reason        ├──held / dropped: counted, Rejected ring
//	                                               └──published ──▶ last-quote slots ──▶ Updates
//
// Run runs every source and a sweep (silence, hold-downs, ConfirmAfter) until its context ends.
// A websocket source dials, authenticates, subscribes the whole wanted set and reads until the
// socket fails or goes silent (connected, but no accepted quote for longer than SilenceAfter
// while at least one wanted symbol's session is open); then it waits a capped, jittered
// exponential backoff and does it again. The wanted set changes on the live socket without
// reconnecting.
//
// LastTick is lock-free and allocation-free: a copy-on-write index (behind an atomic pointer)
// maps each symbol to a slot holding an atomic pointer to its latest published Quote. Slots are
// written under the symbol's mutex by whichever source's offer publishes; index changes (new
// symbols) are rare and serialised by a mutex.
//
// The engine must never publish a quote it cannot date (missing or non-positive provider time),
// with a non-positive or non-finite bid or ask, or crossed (bid > ask), nor a tick the spike
// filter holds or dropped; never block a source on a slow Updates subscriber (the subscriber
// loses updates, counted, instead); never read the wall clock where Config.Now should decide;
// never decide which symbols are wanted (callers pass named sets: enabled instruments, exposed
// symbols, pinned conversion legs); and never know about the lease, accounts or orders.
package tick
