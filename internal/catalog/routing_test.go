package catalog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/routing"
)

// A change of rules reaches the next snapshot the process's cache serves, in the order the
// rules are asked, with whether any reads a profile; a group with rules is not deleted; a rule
// routing to A_BOOK needs a venue.
func TestRoutingRulesInTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cache := NewCache(testDB, time.Minute)
	admin, err := NewAdmin(AdminConfig{DB: testDB, Cache: cache, Venue: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateAccountGroup(asAdmin(), "rt-snap", AccountGroupPatch{}); err != nil {
		t.Fatal(err)
	}
	cat, err := cache.Get(ctx) // cached before the rules exist
	if err != nil || len(cat.Routing["rt-snap"]) != 0 {
		t.Fatalf("rules before any: %v %v", cat.Routing["rt-snap"], err)
	}
	five := decimal.NewFromInt(5)
	big, err := admin.CreateRoutingRule(asAdmin(), "rt-snap", routing.Rule{VolumeMin: &five, Action: routing.ABook})
	if err != nil {
		t.Fatal(err)
	}
	twenty := int64(20)
	prof, err := admin.CreateRoutingRule(asAdmin(), "rt-snap", routing.Rule{MinTrades: &twenty, Action: routing.ABook})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ReorderRoutingRules(asAdmin(), "rt-snap", []int64{prof.ID, big.ID}); err != nil {
		t.Fatal(err)
	}
	cat, err = cache.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rules := cat.Routing["rt-snap"]
	if len(rules) != 2 || rules[0].ID != prof.ID || rules[1].ID != big.ID || rules[0].Priority != 1 || !cat.RoutingUsesProfile {
		t.Fatalf("snapshot rules %+v (profile %v), want the profile rule first", rules, cat.RoutingUsesProfile)
	}
	if _, err := admin.DeleteAccountGroup(asAdmin(), "rt-snap"); fx.ErrorCode(err) != fx.ECONFLICT || !strings.Contains(err.Error(), "routing rules") {
		t.Fatalf("delete of a group with rules: %v", err)
	}
	venueless, err := NewAdmin(AdminConfig{DB: testDB, Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := venueless.UpdateRoutingRule(asAdmin(), "rt-snap", big.ID, routing.Rule{Action: routing.ABook}); fx.ErrorCode(err) != fx.EUNAVAILABLE {
		t.Fatalf("an A_BOOK rule on a desk with no venue: %v", err)
	}
	for _, id := range []int64{big.ID, prof.ID} {
		if _, err := admin.DeleteRoutingRule(asAdmin(), "rt-snap", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.DeleteAccountGroup(asAdmin(), "rt-snap"); err != nil {
		t.Fatalf("delete of the group once its rules are gone: %v", err)
	}
}
