package invariant

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// The stopOutTerms judge, over one account (1) that starts in group "lax" (stop-out at 40 %),
// is moved to "strict" (70 %) at 10:00:00, and whose "strict" level was 60 % until 09:00:00.
// Account 2 never moved and stays in "default" (50 %), which no admin ever edited.
func TestStopOutTermsJudge(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.TimeOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 3, 2, v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
	}
	audits := []dbAudit{
		{ID: 1, At: at("08:00:00"), Action: "account_group.create", EntityType: "account_group", EntityID: "strict", After: nstr(`{"name":"strict","stopOutLevel":"60"}`)},
		{ID: 2, At: at("09:00:00"), Action: "account_group.update", EntityType: "account_group", EntityID: "strict",
			Before: nstr(`{"name":"strict","stopOutLevel":"60"}`), After: nstr(`{"name":"strict","stopOutLevel":"70"}`)},
		{ID: 3, At: at("10:00:00"), Action: "account.move", EntityType: "account", EntityID: "1", Before: nstr(`{"id":1,"group":"lax"}`), After: nstr(`{"id":1,"group":"strict"}`)},
	}
	type decision struct {
		account                                  int64
		decided, group, stopOut, level, eq, used string
	}
	cases := []struct {
		name string
		d    *decision // nil: the record has no decision
		want string    // a fragment of the violation; "" for none
	}{
		{"under the new group after the move", &decision{1, "10:00:30", "strict", "70", "65.5", "655.00", "1000.00"}, ""},
		{"under the old group long after the move: the defect", &decision{1, "10:00:30", "lax", "40", "35.5", "355.00", "1000.00"}, `marked with group "lax"`},
		{"under the old group while the move is still on its way to the engine", &decision{1, "10:00:04", "lax", "40", "35.5", "355.00", "1000.00"}, ""},
		{"under the old group before the move", &decision{1, "09:59:00", "lax", "40", "35.5", "355.00", "1000.00"}, ""},
		{"under the new group before the move committed", &decision{1, "09:59:00", "strict", "70", "65.5", "655.00", "1000.00"}, `marked with group "strict"`},
		{"under the group's old level long after it changed", &decision{1, "10:00:30", "strict", "60", "55.5", "555.00", "1000.00"}, "used stop-out level 60"},
		{"above the level it used", &decision{1, "10:00:30", "strict", "70", "71", "710.00", "1000.00"}, "above the stop-out level"},
		{"a level its own equity and margin do not give", &decision{1, "10:00:30", "strict", "70", "65.5", "600.00", "1000.00"}, "is not equity"},
		{"a negative equity, within its rounding", &decision{1, "10:00:30", "strict", "70", "-98.49532710280374", "-526.95", "535.00"}, ""},
		{"an account never moved, its group never edited", &decision{2, "10:00:30", "default", "50", "49.99", "499.90", "1000.00"}, ""},
		{"an account never moved, marked with another group", &decision{2, "10:00:30", "strict", "70", "49.99", "499.90", "1000.00"}, `marked with group "strict"`},
		{"a stop-out that records no decision", nil, "records no decision"},
	}
	for _, tc := range cases {
		payload := map[string]any{"accountId": 1, "positionId": 9}
		if d := tc.d; d != nil {
			payload["accountId"] = d.account
			payload["decision"] = map[string]any{"decidedAt": at(d.decided), "group": d.group, "stopOutLevel": d.stopOut, "marginLevel": d.level,
				"equity": d.eq, "usedMargin": d.used, "symbols": []any{}}
		}
		b, _ := json.Marshal(payload)
		s := &Snapshot{Accounts: []dbAccount{{ID: 1, Group: "strict"}, {ID: 2, Group: "default"}}, Audits: audits,
			StopOutLevels: map[string]decimal.Decimal{"lax": dec("40"), "strict": dec("70"), "default": dec("50")},
			Events:        []dbEvent{{ID: 1, Account: 1, Type: "account.stop_out", Payload: string(b)}}}
		r := checkStopOutTerms(s)
		switch {
		case tc.want == "" && len(r.Violations) > 0:
			t.Errorf("%s: flagged %v", tc.name, r.Violations)
		case tc.want != "" && (len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Text, tc.want)):
			t.Errorf("%s: violations %v, want one saying %q", tc.name, r.Violations, tc.want)
		}
	}
}
