// Package soak is the desk's chaos soak (`make soak`, docs/soak.md; cmd/soak is its thin main): the real
// binaries — two fxdesk-web processes with CRON_MODE=off on one host name and one fxdesk-cron —
// on a fresh database and a private redis-server, both reached through TCP proxies the soak can
// cut, under trader load from several concurrent clients and faults at intervals drawn from a
// seed. Both web processes stream from one cmd/feedsim and send the A-book (a third of the
// traders, on an EXTERNAL account group) to one venue priced from that feed — cmd/venuesim over
// REST, or for a third of the seeds cmd/fixvenue over one FIX session (venue_fix.go); the venue's
// faults go in through its control API, beside the process faults. A third lane attacks the
// front door (docs/architecture.md, «The front door»): an attacker token floods one web process with streams past its cap, unknown
// tokens and bad bodies, and an accepted order's requestNonce is sent again with another body.
// Every client names its own address in X-Forwarded-For (the soak is the desk's trusted proxy),
// so the per-address limit counts the attacker apart from the traders. An admin lane works the
// desk as its staff beside the traders, each action with the token of the role whose permission
// its route names (no superadmin token): group edits (risk), account moves, a symbol override and
// dealer closes (dealer), account states (support), deposits (finance), each admin write with a
// request id its audit row must carry; two thin accounts, one with negative balance protection,
// stand where a gap takes them below zero. A refused-request lane (refused.go) sends what the desk
// must refuse — role tokens outside their permissions, a read-only trader's token trading, an
// expired and a revoked token past their bound — each with a request id no audit row may carry.
//
// The rollover faults' runs walk consecutive weekday rollovers ahead of the clock, each on time
// for its own (endofday.go), so every run captures its day's closing prices and freezes the end
// of day; some are killed where the soak holds the freeze (once its day's prices or account rows
// are in), one day is left to the next rollover's run to catch up, and every end-of-day row is
// kept as first read, to be held to it.
//
// Each trader also holds its events stream open through the whole load, resuming with
// Last-Event-ID across every kill, stop and cut; at the end what each saw, and the host
// platform's Redis Stream read whole, are compared with the events table.
//
// Everything a client sent and what it was answered goes to journal.jsonl (a timeout is
// "outcome unknown"); every process's /api/admin/fx/desk, the lease row and the quote mirror
// snapshot are sampled every 200 ms into samples.jsonl. Invariants are checked every 30 s on one
// REPEATABLE READ snapshot of the database and at the end, each reported with its figures: package
// invariant judges, on what this package recorded; this package drives — the processes and their
// cluster, the faults, the load, the sampler, the front-door attacker, the venue lane and the run
// with its tally and report. Before
// the summary, one line adds up the group commit counters each web process last reported: how
// many batches went in one round trip on remembered accounts and how many ran again after a stale
// check (a deposit, a swap, a rollover run moved an account behind the committer). The last line
// is the summary:
//
//	soak: PASS seed=… seconds=… venue=rest requests=… faults={kill:1,…} admin={groupEdit:…,…} refused={permission:…,…} eod={days:…,…} invariants=… violations=0
//
// On a failure the exit status is non-zero, the failing invariants are printed with the rows
// that break them, and the run folder (process logs, journal, samples) is kept and named. The
// same seed replays the same fault schedule; the load and the processes' own timing are not
// replayed.
//
// With -cluster (ha.go, clusterfaults.go; docs/cluster.md, «The cluster soak»), the desk runs
// on a Galera cluster behind HAProxy and on Redis through Sentinel, which scripts/cluster.sh
// starts in the run folder, and a lane of cluster faults kills, partitions and fails them over.
//
// The soak only observes and injects: it never writes to the desk's tables, but for the setup an
// operator would do in SQL before the load (the EXTERNAL account group and its accounts); to hold
// a freeze where it kills it, it takes a locking read of an end-of-day table's empty range.
package soak
