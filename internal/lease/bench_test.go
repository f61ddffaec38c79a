package lease_test

import (
	"context"
	"testing"
)

// BenchmarkClaim measures a boot claim against an expired row: the observing SELECT, the
// conditional UPDATE and the Redis write that makes the key agree.
func BenchmarkClaim(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		e.expireRow()
		k := e.keeper(keeperOpts{host: "bench", pid: 10 + i%1000})
		b.StartTimer()
		if won, err := k.Claim(ctx); err != nil || !won {
			b.Fatalf("claim won=%v err=%v", won, err)
		}
	}
}

// BenchmarkRenew measures one renew cycle: one UPDATE and one Redis SET.
func BenchmarkRenew(b *testing.B) {
	e := newEnv(b)
	k := e.keeper(keeperOpts{host: "bench", pid: 1})
	ctx := context.Background()
	if won, err := k.Claim(ctx); err != nil || !won {
		b.Fatalf("claim won=%v err=%v", won, err)
	}
	for b.Loop() {
		if !k.Renew(ctx) {
			b.Fatal("renew failed")
		}
	}
}

// BenchmarkHoldsLease is the gate every unit of guarded work passes.
func BenchmarkHoldsLease(b *testing.B) {
	e := newEnv(b)
	// A still clock: the trust window must not run out during a long benchmark.
	k := e.keeper(keeperOpts{host: "bench", pid: 1, clock: newFakeClock()})
	if won, _ := k.Claim(context.Background()); !won {
		b.Fatal("claim lost")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !k.HoldsLease() {
			b.Fatal("lease not held")
		}
	}
}
