package invariant

import "time"

// The soak's settings the checks judge by. The driver configures the desk and itself from these
// (the processes' environment, the sampler's period, the attacker's token and account), so each
// has one home and the checks' bounds cannot drift from what the soak set.

// SampleEvery is how often the soak samples every process's /desk, the lease row and the mirror.
const SampleEvery = 200 * time.Millisecond

// MirrorInterval is the soaked desk's quote mirror publish interval.
const MirrorInterval = 1 * time.Second

// The front door's limits as the soak sets them, so its checks know the bounds. The rate per
// token is the default, and the soak's own load stays under it (checkLoadNotLimited says so);
// the per-address rate stays the default too, because every soak client names an address of
// its own in X-Forwarded-For and the soak is the trusted proxy (127.0.0.1), as nginx is in
// compose — without that every client, the attacker included, would share 127.0.0.1's bucket.
const (
	RatePerToken    = 50
	StreamsPerToken = 8
	BodyLimit       = 65536
)

// The attacker of the front-door faults: a platform user of its own with a live token (issued
// with the traders'), journaled under a client name of its own.
const (
	AttackerClient = "attacker"
	AttackerUser   = 9001
)
