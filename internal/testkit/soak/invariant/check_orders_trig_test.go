package invariant

import (
	"database/sql"
	"testing"
)

// A planted violation of each check fails it, and the clean state beside it passes.
func TestTriggerOrderChecksCatchPlantedViolations(t *testing.T) {
	t.Parallel()
	link := func(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: true} }
	clean := &Snapshot{Triggers: []dbTriggerOrder{
		{ID: 1, Side: "BUY", Type: "STOP", Status: "FILLED", OCO: link(2)},
		{ID: 2, Side: "SELL", Type: "STOP_LIMIT", Status: "CANCELLED", LimitPrice: nd("1.1"), OCO: link(1)},
		{ID: 3, Side: "BUY", Type: "STOP_LIMIT", Status: "FILLED", LimitPrice: nd("1.1040"), FillPrice: nd("1.1040")},
		{ID: 4, Side: "SELL", Type: "STOP_LIMIT", Status: "FILLED", LimitPrice: nd("1.0950"), FillPrice: nd("1.0951")},
	}}
	if r := checkOCOAtMostOneFilled(clean, nil); len(r.Violations) != 0 {
		t.Fatalf("clean OCO: %+v", r.Violations)
	}
	if r := checkStopLimitWithinLimit(clean, nil); len(r.Violations) != 0 {
		t.Fatalf("clean STOP_LIMIT: %+v", r.Violations)
	}
	for name, s := range map[string]*Snapshot{
		"both filled":          {Triggers: []dbTriggerOrder{{ID: 1, Status: "FILLED", OCO: link(2)}, {ID: 2, Status: "FILLED", OCO: link(1)}}},
		"partner left pending": {Triggers: []dbTriggerOrder{{ID: 1, Status: "PENDING", OCO: link(2)}, {ID: 2, Status: "FILLED", OCO: link(1)}}},
		"one-way link":         {Triggers: []dbTriggerOrder{{ID: 1, Status: "PENDING", OCO: link(2)}, {ID: 2, Status: "PENDING"}}},
	} {
		if r := checkOCOAtMostOneFilled(s, nil); len(r.Violations) != 1 {
			t.Errorf("%s: %d violations; want 1", name, len(r.Violations))
		}
	}
	for name, o := range map[string]dbTriggerOrder{
		"buy above its limit":  {ID: 5, Side: "BUY", Type: "STOP_LIMIT", Status: "FILLED", LimitPrice: nd("1.1040"), FillPrice: nd("1.1041")},
		"sell below its limit": {ID: 6, Side: "SELL", Type: "STOP_LIMIT", Status: "FILLED", LimitPrice: nd("1.0950"), FillPrice: nd("1.0949")},
	} {
		if r := checkStopLimitWithinLimit(&Snapshot{Triggers: []dbTriggerOrder{o}}, nil); len(r.Violations) != 1 {
			t.Errorf("%s: %d violations; want 1", name, len(r.Violations))
		}
	}
}

// The events check knows a STOP_LIMIT: accepted once like any resting order, and told once by
// order.stop_triggered when (and only when) its stop triggered.
func TestEventsCheckTellsAStopLimitsTriggerOnce(t *testing.T) {
	t.Parallel()
	fixture := func(stopTriggered int) *Snapshot {
		s := eventsFixture()
		s.Orders = append(s.Orders, dbOrder{ID: 106, Account: 1, Type: "STOP_LIMIT", Status: "PENDING"})
		s.Triggers = append(s.Triggers, dbTriggerOrder{ID: 106, Side: "BUY", Type: "STOP_LIMIT", Status: "PENDING", LimitPrice: nd("1.1"), Triggered: true})
		with(s, "order.accepted", map[string]any{"id": 106, "status": "PENDING"})
		for range stopTriggered {
			with(s, "order.stop_triggered", map[string]any{"id": 106, "status": "PENDING"})
		}
		return s
	}
	if r := checkEvents(fixture(1)); len(r.Violations) != 0 {
		t.Fatalf("a triggered stop-limit told once: %+v", r.Violations)
	}
	for _, n := range []int{0, 2} {
		if r := checkEvents(fixture(n)); len(r.Violations) != 1 {
			t.Errorf("told by %d order.stop_triggered: %+v; want one violation", n, r.Violations)
		}
	}
}
