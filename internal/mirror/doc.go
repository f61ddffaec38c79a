// Package mirror is the one home of the lease holder's prices on Redis: the holder publishes
// them, and processes without a price feed of their own serve them. It has two transports, one
// per reader:
//
//   - The snapshot (SnapshotPublisher, SnapshotFollower), for fxdesk-cron, which has no price
//     stream but converts swaps and equity: every 5 s the holder writes one key holding every
//     quote; the follower polls it and pins the conversion legs it lacks.
//   - The stream (StreamPublisher, StreamFollower), for follower web processes of a forwarding
//     web tier: every tick the holder's engine accepts goes out on one pub/sub channel, and each
//     follower serves /quotes, /symbols states and the markets rail from what it hears.
//
// The two, under the default names:
//
//	holder (CRON_MODE=off)                       Redis                       fxdesk-cron
//	tick engine ─LastTick─▶ SnapshotPublisher ─SET PX 15m─▶ fx:quote-mirror:snapshot ◀─GET+PTTL─ SnapshotFollower ─LastTick─▶ conversions
//	tick engine ◀─SetSource("pinned")─ SnapshotPublisher ◀─HGETALL─ fx:quote-mirror:pins ◀─HSET+PEXPIRE─ SnapshotFollower.Pin
//	                                   SnapshotPublisher ◀── PUBLISH fx:quote-mirror:pin-requests (a nudge) ── SnapshotFollower.Pin
//	                                                                            SnapshotFollower ─Raise/Resolve─▶ alert inbox
//
//	holder (FXDESK_FORWARD on)                   Redis                       follower web process
//	tick engine ─Updates─▶ StreamPublisher ─PUBLISH─▶ fx:ticks ─SUBSCRIBE─▶ StreamFollower ─LastTick, SymbolState, Updates─▶ desk.Quotes
//
// Both followers answer tick.Prices, the desk's one read of prices, so the code that converts or
// shows a price does not care which process it runs in.
//
// Names. The names above are those of the default FXDESK_REDIS_PREFIX (fx); an install with
// another prefix uses <prefix>:… (the configs' Names, from internal/redisname), so installs that
// share a Redis server — whose pub/sub channels ignore the database number — never read each
// other's prices or pins.
//
// What the transports share, so that they cannot drift apart:
//
//   - One encoding (encoding.go), through encoding/json: a quote is {"bid","ask","receivedAt"}
//     in both, prices as decimal strings in the instrument's digits, times as RFC 3339 UTC with
//     milliseconds, readable with redis-cli (GET the snapshot, SUBSCRIBE to the ticks). A
//     follower never stores a quote it cannot price or date.
//   - One term fence (termFence): every snapshot and every tick carries its publisher's lease
//     term, and a follower serves nothing of a term older than the newest it has served. Term 0
//     (a lease granted by Redis or fail-open, with no row to number it) is not fenced.
//   - One age rule (receivedHere): a quote's age is (sent − received), both on the holder's
//     clock, plus the time it waited before this process first saw it, plus this process's own
//     monotonic time since. Skew between the machines' wall clocks cancels out of every term.
//
// The snapshot. One key, one SET per publish, one GET per poll: the snapshot is one JSON document
// (snapshot.go), one symbol per line, about 84 bytes a symbol (some 420 KB at the 5,000-symbol
// cap, pinned and exposed symbols kept first when the cap bites; truncation is logged with the
// count dropped). A hash with a field per symbol would cost the leader an HSET of 5,000 fields and
// could be read half-updated. The snapshot is published every 5 s, so simple code wins over the
// last fraction of a millisecond: BenchmarkSnapshotPublish5000 reports what encoding/json costs.
// When a pin read is due it goes out on a second connection while the snapshot is written (the
// pin hash is another Cluster slot and cannot join the snapshot's transaction), so a cycle still
// waits for one round trip.
//
// Its time in Redis counts in its age: the follower reads the key's remaining TTL (counted by the
// Redis server), so a follower that starts next to a dead leader's 10-minute-old snapshot does not
// call it fresh. A mid older than MaxAge is refused while its session is open; when the session is
// closed, the last mid serves.
//
// Terms. Only the lease holder publishes, through the gate (gate.MirrorPublish for the snapshot,
// gate.TickPublish for the stream): past its trust window a holder publishes nothing, it resumes
// when a renew restores the same term, and after the lease was lost to another process it never
// publishes again. The gate cannot stop a publish that passed it just before the holder froze and
// lands after its successor's. Pub/sub keeps nothing, so the stream's followers alone fence it.
// The snapshot is also fenced where it is stored: the publish is one MULTI/EXEC on the one key, a
// small Lua guard reads the stored snapshot's term from its header (GETRANGE) and deletes the key
// unless that term is newer, then SET NX writes the snapshot with its TTL — so a publish older
// than the stored term writes nothing, in the same round trip, and is reported as a fenced write.
// The snapshot follower also fences (a copy restored by hand has no guard), logging a run of
// refusals once and counting each, and forgets the newest term when the key is found missing.
//
// Pins. The snapshot follower asks for legs it lacks with HSET on a second key (symbol → a stamp
// it changes on every refresh), rewritten with the key's TTL by the poll that follows a change of
// the set and then every PinRefresh (one minute), for PinHold after the last Pin. The leader reads
// the hash when a follower's PUBLISH nudge arrives, when its subscription comes back after a
// reconnect (nudges sent meanwhile are lost: pub/sub is fire-and-forget), and once per PinRefresh
// alongside a publish; it judges a pin live while its stamp keeps changing on the leader's own
// clock, so a follower that stopped asking lets the leg go after KeyTTL and no follower clock is
// ever compared with the leader's.
//
// Every Redis operation touches one key (the pipelines hold commands on different keys, which a
// Cluster client splits by slot), as Redis Cluster needs; Redis Cluster itself is untested
// (docs/cluster.md).
//
// The package must never decide roles — the caller runs the publishers only on the lease holder
// (the snapshot's with CRON_MODE=off, the stream's with forwarding on), the snapshot follower
// only in fxdesk-cron and the stream follower only on a follower web process — never price a
// fill from a follower's quotes (they are for conversions and display; the gate refuses
// desk-priced work on a follower, which forwards it to the holder), never read the wall clock
// where an injected Now should decide, never serve a mid older than MaxAge while its session is
// open, and never raise quote-mirror-unavailable on a desk with no open positions or resting
// orders.
package mirror
