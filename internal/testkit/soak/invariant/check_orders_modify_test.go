package invariant

import (
	"database/sql"
	"testing"
)

// A clean history passes; each planted violation — a modify after the fill, a modified buy limit
// filled at the quote that fired its old price, a modified sell stop filled before its new stop —
// fails, naming the order.
func TestCheckModifiedOrders(t *testing.T) {
	t.Parallel()
	base := func(extra ...ev) *Snapshot {
		es := []ev{
			{"order.accepted", map[string]any{"id": 7, "symbol": "EURUSD", "side": "BUY", "type": "LIMIT", "price": "1.09"}},
			{"order.modified", map[string]any{"id": 7, "symbol": "EURUSD", "side": "BUY", "type": "LIMIT", "price": "1.08"}},
			{"order.accepted", map[string]any{"id": 8, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.09"}},
			{"order.modified", map[string]any{"id": 8, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.085"}},
			{"order.cancelled", map[string]any{"id": 8, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.085"}},
		}
		return &Snapshot{Accounts: []dbAccount{{ID: 1, Group: "default"}}, Instruments: map[string]dbInstrument{"EURUSD": {Point: dec("0.00001"), Markup: dec("5")}},
			Events: eventRows(append(es, extra...)...)}
	}
	filled := func(id int, side, typ, fill string) ev {
		return ev{"order.triggered", map[string]any{"id": id, "symbol": "EURUSD", "side": side, "type": typ, "price": "1.08", "fillPrice": fill}}
	}
	// At its new price, plus the markup (5 points): clean.
	if r := checkModifiedOrders(base(filled(7, "BUY", "LIMIT", "1.08005")), nil); len(r.Violations) != 0 {
		t.Fatalf("clean history: %v", r.Violations)
	}
	// A stop fills at its batch's quote, which can be a little better than the quote that fired it.
	retraced := base()
	retraced.Events = eventRows(
		ev{"order.modified", map[string]any{"id": 9, "symbol": "EURUSD", "side": "BUY", "type": "STOP", "price": "1.26381"}},
		ev{"order.triggered", map[string]any{"id": 9, "symbol": "EURUSD", "side": "BUY", "type": "STOP", "price": "1.26381", "fillPrice": "1.26304"}})
	if r := checkModifiedOrders(retraced, nil); len(r.Violations) != 0 {
		t.Fatalf("a stop filled 0.06 %% better than its stop: %v", r.Violations)
	}
	// Filled with an override's markup (8 points) that the dealer cleared before the end: the
	// audit log says the group had one during the run, so its LIMITs are not judged on the
	// instrument's markup.
	cleared := base(filled(7, "BUY", "LIMIT", "1.08008"))
	if r := checkModifiedOrders(cleared, nil); len(r.Violations) == 0 {
		t.Fatalf("a fill 8 points past its price with the instrument's markup 5 and no override: not caught")
	}
	cleared.Audits = []dbAudit{{Action: "symbol_override.delete", EntityType: "symbol_override", EntityID: "default/EURUSD"}}
	if r := checkModifiedOrders(cleared, nil); len(r.Violations) != 0 {
		t.Fatalf("a fill with the markup of an override cleared during the run: %v", r.Violations)
	}
	// Filled while its account was in a group with an override, moved out before the end.
	moved := base(filled(7, "BUY", "LIMIT", "1.08008"))
	moved.Audits = []dbAudit{
		{Action: "symbol_override.update", EntityType: "symbol_override", EntityID: "soak-a/EURUSD"},
		{Action: "account.move", EntityType: "account", EntityID: "1", Before: sql.NullString{String: `{"id":1,"group":"soak-a"}`, Valid: true},
			After: sql.NullString{String: `{"id":1,"group":"default"}`, Valid: true}},
	}
	if r := checkModifiedOrders(moved, nil); len(r.Violations) != 0 {
		t.Fatalf("a fill while the account was in an overridden group: %v", r.Violations)
	}
	moved.Audits = moved.Audits[1:] // no override anywhere: judged, and caught
	if r := checkModifiedOrders(moved, nil); len(r.Violations) == 0 {
		t.Fatalf("a fill 8 points past its price of an account moved between groups without overrides: not caught")
	}
	for name, s := range map[string]*Snapshot{
		"modified after its fill": base(filled(7, "BUY", "LIMIT", "1.07990"),
			ev{"order.modified", map[string]any{"id": 7, "symbol": "EURUSD", "side": "BUY", "type": "LIMIT", "price": "1.07"}}),
		"modified after its cancel": base(ev{"order.modified", map[string]any{"id": 8, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.08"}}),
		"filled at the old price":   base(filled(7, "BUY", "LIMIT", "1.08990")),
		"a stop filled before its new stop": func() *Snapshot {
			s := base()
			s.Events = eventRows(
				ev{"order.modified", map[string]any{"id": 9, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.07"}},
				ev{"order.triggered", map[string]any{"id": 9, "symbol": "EURUSD", "side": "SELL", "type": "STOP", "price": "1.07", "fillPrice": "1.0799"}})
			return s
		}(),
	} {
		if r := checkModifiedOrders(s, nil); len(r.Violations) == 0 {
			t.Errorf("%s: not caught", name)
		}
	}
}
