// Package mirror owns the quote mirror (docs/architecture.md, «Prices on Redis: the quote mirror
// and the tick stream»): the lease holder's prices, published to Redis for fxdesk-cron, which has
// no price stream but converts swaps and equity.
//
//	holder (CRON_MODE=off)                       Redis                       fxdesk-cron
//	tick engine ─LastTick─▶ Publisher ─SET PX 15m─▶ fx:quote-mirror:snapshot ◀─GET+PTTL─ Follower ─LastTick─▶ conversions
//	tick engine ◀─SetSource("pinned")─ Publisher ◀─HGETALL─ fx:quote-mirror:pins ◀─HSET+PEXPIRE─ Follower.Pin
//	                                   Publisher ◀──── PUBLISH fx:quote-mirror:pin-requests (a nudge) ─────── Follower.Pin
//	                                                                            Follower ─Raise/Resolve─▶ alert inbox
//
// Names. The three names above are those of the default FXDESK_REDIS_PREFIX (fx); an install
// with another prefix uses <prefix>:quote-mirror:… (PublisherConfig.Names and
// FollowerConfig.Names, from internal/redisname), so installs that share a Redis server — whose
// pub/sub channels ignore the database number — never read each other's snapshot or pins.
//
// Layout and encoding. One key, one SET per publish, one GET per poll: the snapshot is one JSON
// document (snapshot.go) an operator reads with `redis-cli GET fx:quote-mirror:snapshot`, one
// symbol per line, prices as decimal strings in the instrument's digits and times as RFC 3339 UTC
// with milliseconds, about 84 bytes a symbol (some 420 KB at the 5,000-symbol cap). A hash with a
// field per symbol would cost the leader an HSET of 5,000 fields and the follower an HGETALL
// building 5,000 strings, and could be read half-updated. The JSON is written and read by hand
// for its one fixed shape, not through encoding/json: the publisher formats straight from the
// tick engine's ordered walk into one reused buffer — with or without pinned and exposed legs,
// which only reorder anything when the cap bites — and the follower decodes into one
// pointer-free sorted slice that LastTick binary-searches without allocating. The benchmark
// holds both against a plain SET and GET of the same bytes. When a pin read is due it goes out on
// a second connection while the snapshot is written (the pin hash is another Cluster slot and
// cannot join the snapshot's transaction), so a cycle still waits for one round trip.
//
// Terms. Only the lease holder publishes, through the gate (gate.MirrorPublish): past its trust
// window a holder publishes nothing, it resumes when a renew restores the same term, and after
// the lease was lost to another process it never publishes again. The gate cannot stop a publish
// that passed it just before the holder froze and lands after its successor's, so the snapshot
// carries the publisher's lease term, and the publish is one MULTI/EXEC on the one key: a small
// Lua guard reads the stored snapshot's term from its fixed header (GETRANGE) and deletes the key
// unless that term is newer, then SET NX writes the snapshot with its TTL — so a publish older
// than the stored term writes nothing, in the same round trip, and is reported as a fenced write.
// The snapshot is not passed into Lua: a 420 KB script argument measured about three plain SETs.
// The follower also keeps the newest term it served and refuses an older one, logging a run of
// refusals once and counting each. Term 0 (a lease granted by Redis or fail-open, with no row to
// number it) is not fenced.
//
// Pins. The follower asks for legs it lacks with HSET on a second key (symbol → a stamp it
// changes on every refresh), rewritten with the key's TTL by the poll that follows a change of
// the set and then every PinRefresh (one minute), for PinHold after the last Pin. The leader reads
// the hash when a follower's PUBLISH nudge arrives, when its subscription comes back after a
// reconnect (nudges sent meanwhile are lost: pub/sub is fire-and-forget), and once per
// PinRefresh alongside a publish; it judges a pin live while its stamp keeps changing on the
// leader's own clock, so a follower that stopped asking lets the leg go after KeyTTL and no
// follower clock is ever compared with the leader's. The hash is the authority and the nudge only
// says "read it now": a new leg is subscribed within milliseconds and is in the next regular
// snapshot, and a nudge lost without a reconnect costs at most PinRefresh. Reading the hash on
// every publish instead cost each publish about a tenth of a plain SET of the snapshot.
//
// Ages are measured on the leader's clock: a mid's age is (publishedAt − receivedAt), both leader
// readings, plus how long the follower has known this snapshot on its own monotonic clock, plus how
// long the snapshot sat in Redis before the follower first saw it, read from the key's remaining
// TTL (counted by the Redis server). The last term is the one a simpler rule leaves out; it keeps a
// follower that starts next to a dead leader's 10-minute-old snapshot from calling it fresh. Skew
// between the machines' wall clocks cancels out of every term.
//
// Every Redis operation touches one key (the pipelines hold commands on different keys, which a
// Cluster client splits by slot), so Redis Cluster works unchanged (docs/architecture.md, «Beyond
// one machine»).
//
// The package must never decide roles — the caller runs the Publisher only on a lease holder with
// CRON_MODE=off and the Follower only in fxdesk-cron — never read the wall clock where an injected
// Now should decide, never serve a mid older than MaxAge while its session is open, and never
// raise quote-mirror-unavailable on a desk with no open positions or resting orders.
package mirror
