package events

import (
	"path"
	"strings"
	"testing"

	"fxdesk/internal/testkit/sqlsource"
)

// insertPrefix is how every text of the events INSERT starts.
const insertPrefix = "INSERT INTO `fx_event` (`id`, `accountId`, `userId`, `type`, `payload`, `term`, `createdAt`) VALUES "

// writesEvents and writesSeq match any statement that writes fx_event or its sequence.
var (
	writesEvents = sqlsource.WritesTable("fx_event")
	writesSeq    = sqlsource.WritesTable("fx_event_seq")
)

// The detector is a test that can fail: it must see each way of writing the outbox, and
// nothing else.
func TestWritesEventsDetector(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sql  string
		want bool
	}{
		{insertSQL, true},
		{seqSQL, false},
		{"insert ignore into fx_event (a) values (1)", true},
		{"REPLACE INTO `fxdesk`.`fx_event` VALUES (?)", true},
		{"UPDATE `fx_event` SET `payload` = NULL", true},
		{"DELETE FROM `fx_event` WHERE `id` = ?", true},
		{"TRUNCATE TABLE fx_event", true},
		{loadDataSQL("?"), true},
		{"load data local infile 'x' replace into table fxdesk.fx_event (a)", true},
		{"LOAD DATA LOCAL INFILE '?' INTO TABLE `fx_event_relay` (`id`)", false},
		{"SELECT `id` FROM `fx_event` ORDER BY `id`", false},
		{"INSERT INTO `fx_event_relay` (`id`) VALUES (?)", false},
	} {
		if got := writesEvents.MatchString(c.sql); got != c.want {
			t.Errorf("writesEvents(%q) = %v, want %v", c.sql, got, c.want)
		}
	}
}

// The outbox is append-only and has one writer: the only statements in the module's non-test
// sources that write fx_event are this package's INSERT (its payload a placeholder or a
// JSON_SET of one), its LOAD DATA of a generated history (LoadAll) and its retention's one DELETE (Prune, of events every consumer has), and the
// only one that writes its sequence is this package's seqSQL. No update, no other delete, no
// second writer.
func TestOnlyAddWritesTheOutbox(t *testing.T) {
	t.Parallel()
	texts := sqlsource.ModuleTexts(t)
	inserts, seqs := 0, 0
	for _, s := range texts {
		mine := path.Dir(s.File) == "internal/events"
		switch {
		case writesSeq.MatchString(s.Text):
			if mine && s.Text == seqSQL {
				seqs++
				continue
			}
			t.Errorf("%s writes fx_event_seq other than through events.Add: %s", s.Where(), s.Text)
		case writesEvents.MatchString(s.Text):
			if mine && strings.HasPrefix(s.Text, insertPrefix) {
				inserts++
				continue
			}
			if mine && s.Text == pruneSQL {
				continue
			}
			if mine && s.Text == loadDataSQL("?") { // LoadAll: a generated history, never the desk's
				continue
			}
			t.Errorf("%s writes fx_event other than through events.Add: %s", s.Where(), s.Text)
		}
	}
	if inserts == 0 || seqs == 0 {
		t.Errorf("found %d events INSERTs and %d sequence UPDATEs, want some of each: the walk is not seeing them", inserts, seqs)
	}
}

// Ids the batch learns as it runs are spliced into the encoded payload as text by CONCAT, in the
// places of their fields; anything else in a variable's place is refused, as it would be spliced
// into the statement, and so is a field the payload lacks.
func TestRowFromSession(t *testing.T) {
	t.Parallel()
	r, err := rowOf(Event{AccountID: 1, UserID: 2, Type: PositionOpened, Payload: Position{Symbol: "EURUSD"},
		FromSession: []SessionField{{"id", "@fx_p3"}, {"orderId", "@fx_o2"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "CONCAT(?, @fx_p3, ?, @fx_o2, ?)"; !strings.Contains(r.sql, want) || len(r.args) != 7 {
		t.Fatalf("row = %s %v, want the payload as %s and 7 arguments", r.sql, r.args, want)
	}
	if r.args[3] != `{"id":` || r.args[4] != `,"accountId":0,"orderId":` || !strings.HasPrefix(r.args[5].(string), `,"symbol":"EURUSD",`) {
		t.Errorf("pieces %q, want the encoded payload cut around the values of id and orderId", r.args[3:6])
	}
	for _, f := range []SessionField{{"id", "@fx_p3; DROP"}, {"id'", "@fx_p3"}, {"id", "LAST_INSERT_ID()"}, {"noSuchField", "@fx_p3"}} {
		if _, err := rowOf(Event{AccountID: 1, UserID: 2, Type: PositionOpened, Payload: Position{}, FromSession: []SessionField{f}}); err == nil {
			t.Errorf("row took session field %+v", f)
		}
	}
	if _, err := rowOf(Event{AccountID: 1, UserID: 2, Type: PositionOpened, Payload: 1, FromSession: []SessionField{{"id", "@fx_p3"}}}); err == nil {
		t.Error("row took session fields for a payload that is not an object")
	}
}
