package events

import (
	"path"
	"regexp"
	"strings"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// insertPrefix is how every text of Row's INSERT starts.
const insertPrefix = "INSERT INTO `fx_event` (`accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES (?, ?, ?, "

// writesEvents matches any statement that writes fx_event.
var writesEvents = sqlsource.WritesTable("fx_event")

// The detector is a test that can fail: it must see each way of writing the outbox, and
// nothing else.
func TestWritesEventsDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{insertSQL, true},
		{"insert ignore into fx_event (a) values (1)", true},
		{"REPLACE INTO `fxdesk`.`fx_event` VALUES (?)", true},
		{"UPDATE `fx_event` SET `payload` = NULL", true},
		{"DELETE FROM `fx_event` WHERE `id` = ?", true},
		{"TRUNCATE TABLE fx_event", true},
		{"SELECT `id` FROM `fx_event` ORDER BY `id`", false},
		{"INSERT INTO `fx_event_relay` (`id`) VALUES (?)", false},
	} {
		if got := writesEvents.MatchString(c.sql); got != c.want {
			t.Errorf("writesEvents(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// The outbox is append-only and has one writer: the only statements in the module's non-test
// sources that write fx_event are this package's INSERT (Row, its payload a placeholder or a
// JSON_SET of one) and its retention's one DELETE (Prune, of events every consumer has). No
// update, no other delete, no second writer.
func TestOnlyRowWritesTheOutbox(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	inserts := 0
	for _, s := range texts {
		if !writesEvents.MatchString(s.Text) {
			continue
		}
		if path.Dir(s.File) == "internal/events" && strings.HasPrefix(s.Text, insertPrefix) {
			inserts++
			continue
		}
		if path.Dir(s.File) == "internal/events" && s.Text == pruneSQL {
			continue
		}
		t.Errorf("%s writes fx_event other than through events.Row: %s", s.Where(), s.Text)
	}
	if inserts == 0 {
		t.Error("found no events INSERT: the walk is not seeing it")
	}
}

// Ids the batch learns as it runs go into the payload by JSON_SET from their session variables;
// anything else in their place is refused, as it would be spliced into the statement.
func TestRowFromSession(t *testing.T) {
	t.Parallel()
	stmt, args, err := Row(Event{AccountID: 1, UserID: 2, Type: PositionOpened, Payload: map[string]int{"id": 0},
		FromSession: []SessionField{{"id", "@fx_p3"}, {"orderId", "@fx_o2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "JSON_SET(?, '$.id', @fx_p3, '$.orderId', @fx_o2)"; !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(stmt) || len(args) != 5 {
		t.Errorf("Row = %s %v, want the payload as %s and 5 arguments", stmt, args, want)
	}
	for _, f := range []SessionField{{"id", "@fx_p3; DROP"}, {"id'", "@fx_p3"}, {"id", "LAST_INSERT_ID()"}} {
		if _, _, err := Row(Event{AccountID: 1, UserID: 2, Type: PositionOpened, Payload: 1, FromSession: []SessionField{f}}); err == nil {
			t.Errorf("Row took session field %+v", f)
		}
	}
}
