// Package invariant is the chaos soak's judge (docs/soak.md): the invariants the soak checks every
// 30 s and at the end of a run, each a verdict (Result) with its figures and the rows that break
// it. It owns what they judge — one REPEATABLE READ snapshot of the desk's tables (ReadSnapshot),
// the client-side journal's entries, the samples of every process's /desk, the lease row and the
// quote mirror, the venue simulator's state, and what each fault saw — and the settings of the
// soaked desk the checks judge by (its front-door limits, its mirror interval, the sampling
// period, the attacker's identity), so the driver configures the desk from the bounds the checks
// hold it to.
//
// It judges recorded observations and never drives anything: it starts no process, injects no
// fault, sends no request to the desk, and its only read of the database is the read-only
// snapshot. Package soak drives the run and hands every observation in as plain data.
package invariant
