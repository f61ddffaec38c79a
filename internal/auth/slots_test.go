package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

// With every lookup slot taken (a flood of distinct unknown tokens), a token the resolver saw
// lately is still honoured and any other is refused with ErrBusy once LookupWait has passed.
func TestLookupsPastTheSlotsAreRefusedAtOnce(t *testing.T) {
	r := NewResolver(nil) // no lookup may reach the database here
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	for range LookupSlots {
		r.slots <- struct{}{}
	}
	known := "fxd_" + "K123456789012345678901234567890123456789012"
	r.cache[Hash(known)] = cached{p: Principal{UserID: 3}, until: now.Add(-time.Minute)} // expired, within StaleFor
	if p, err := r.Resolve(context.Background(), "Bearer "+known); err != nil || p.UserID != 3 {
		t.Fatalf("a token seen lately: %+v, %v; want honoured", p, err)
	}
	unknown := "fxd_" + "U123456789012345678901234567890123456789012"
	if _, err := r.Resolve(context.Background(), "Bearer "+unknown); !errors.Is(err, ErrBusy) {
		t.Fatalf("an unseen token with every slot taken: %v, want ErrBusy", err)
	}
	if n := r.Lookups(); n != 0 {
		t.Fatalf("%d lookups made with every slot taken", n)
	}
}
