// Package lease decides which single process owns the desk: the holder of the engine lease
// `forex-trading`. Only the holder may run the price stream, the risk engine and the venue jobs,
// and every database write those make is fenced by the lease term.
//
// Two arbiters are consulted, always in this order:
//
//   - the MySQL row `engine_lease` (authoritative): hostname, pid, instanceId, a fencing term and
//     an expiry on the database clock. Because it names a host and a pid, a holder that died on
//     this machine is recognised as dead and its lease is reclaimed at once;
//   - the Redis key `engine:lease:forex-trading`, holding `hostname:pid` with the lease TTL. It is
//     written to agree with the row, and decides alone only while MySQL cannot be reached. That
//     is its name under the default FXDESK_REDIS_PREFIX (fx); under any other prefix it is
//     `<prefix>:engine:lease:forex-trading` (Config.Names, internal/redisname), so installs that
//     share a Redis database never share the key.
//
// A claim is one conditional UPDATE (never read-then-write); a missing row is inserted and a
// duplicate key means the claim was lost. The holder renews every TTL/3 with one UPDATE scoped to
// its own instance and term, and one Redis SET through a compare script.
//
// The holder trusts its lease until the start of its last successful renew + TTL − fence, on the
// monotonic clock. Past that HoldsLease is false and guarded work is dropped at the gate. The
// fence leaves room for work that passed the gate just before the deadline to finish before the
// row can expire and move to someone else.
//
// States of one process. A process that loses at boot never promotes and never polls — unless it
// was built with Config.Standby (FXDESK_TAKEOVER=standby): then it re-contends every TTL/3 with
// the same conditional UPDATE, against the row only, and on winning (an expired row, term + 1)
// announces TookOver before it trusts the lease, and from then on is TRUSTED like a boot winner.
//
//	              claim at boot
//	start ──────────────┬────────────────────────────────┐
//	                    │ won (row, or Redis while        │ lost
//	                    │ MySQL is down, or fail-open)    ▼
//	                    ▼                              FOLLOWER (for life; a standby
//	                    │ ◀─────── row expired: TookOver ─ re-contends every TTL/3)
//	               ┌─────────┐  renew fails past   ┌──────────┐
//	               │ TRUSTED │ ──────────────────▶ │ UNTRUSTED│ gate shut,
//	               │         │ ◀────────────────── │          │ nothing queued
//	               └─────────┘  renew succeeds:    └──────────┘
//	                 │   ▲      event Restored        │
//	      SIGTERM    │   └── (lease_restored sweep)   │ row names another
//	                 ▼                                ▼ instance or term
//	              RELEASED                          LOST: "lease lost" at error once,
//	        (row expired for our term,              gate shut for life, operator
//	         Redis key compare-deleted)             restarts the process
//
// Failure directions, at boot and at renew. MySQL is down when it refused the connection or did
// not answer within two statement deadlines: a claim or renew that only ran out of its deadline
// is asked once more (askTwice), because a slow server is not a down one. A statement whose
// deadline passed may still commit, so a claim is scoped to the term it read and a row that
// names this instance is ours at that row's term (claimRowOnce).
//
//	MySQL  Redis  outcome
//	up     up     the row decides; Redis is written to agree; a disagreement is logged
//	up     down   the row decides alone; one warning
//	down   up     Redis decides a claim (SET NX PX) and renews a lease it granted
//	              (compare-refresh). A lease granted by the row is not extended by Redis alone:
//	              a process that still reaches MySQL would see the row expire and take it.
//	down   down   fail-open: the desk runs. The boxed banner is printed only where a sibling web
//	              process provably exists (configured instances > 1, or another holder observed
//	              earlier in this process's life).
//
// This package must never decide anything from the client clock beyond the local trust window,
// never write the Redis key blindly, and never retry a lost claim.
package lease
