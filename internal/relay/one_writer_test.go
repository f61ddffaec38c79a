package relay_test

import (
	"path"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// The feed's tables have one writer: every statement in the module's non-test sources that
// writes the cursors, the endpoints or the dead letters is this package's (the relay moving a
// cursor in its fenced transaction; the admin creating an endpoint with its cursor, changing it,
// marking a dead letter replayed).
func TestOnlyTheRelayWritesItsTables(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	for _, table := range []string{"fx_event_relay", "fx_webhook", "fx_webhook_dead"} {
		writes := sqlsource.WritesTable(table)
		mine := 0
		for _, s := range texts {
			if !writes.MatchString(s.Text) {
				continue
			}
			if path.Dir(s.File) == "internal/relay" {
				mine++
				continue
			}
			t.Errorf("%s writes %s outside internal/relay: %s", s.Where(), table, s.Text)
		}
		if mine == 0 {
			t.Errorf("found no statement writing %s: the walk is not seeing internal/relay", table)
		}
	}
}
