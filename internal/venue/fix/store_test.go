package fix_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quickfixgo/quickfix"

	"fxdesk/internal/venue"
	"fxdesk/internal/venue/fix"
)

// storeSession is a session key no other test uses.
func storeSession() quickfix.SessionID {
	n := ids.Add(1)
	return quickfix.SessionID{BeginString: quickfix.BeginStringFIX44, SenderCompID: fmt.Sprintf("STORE%d", n), TargetCompID: fmt.Sprintf("PEER%d", n)}
}

func openStore(t *testing.T, id quickfix.SessionID, block int, linger time.Duration) *fix.TestStore {
	t.Helper()
	s, err := fix.OpenTestStore(testDB, id, block, linger)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// body is the stored message numbered seq: a Heartbeat whose TestReqID says "msg <seq>".
func body(seq int) []byte {
	m := quickfix.NewMessage()
	m.Header.SetString(8, quickfix.BeginStringFIX44)
	m.Header.SetString(35, "0")
	m.Header.SetInt(34, seq)
	m.Header.SetString(49, "DESK")
	m.Header.SetString(56, "VENUE")
	m.Header.SetString(52, "20260101-00:00:00.000")
	m.Body.SetString(112, fmt.Sprintf("msg %d", seq))
	return []byte(m.String())
}

// sendN hands out n outgoing numbers as the library does, each with its message.
func sendN(t *testing.T, s *fix.TestStore, n int) {
	t.Helper()
	for range n {
		seq := s.NextSenderMsgSeqNum()
		if err := s.SaveMessageAndIncrNextSenderMsgSeqNum(seq, body(seq)); err != nil {
			t.Fatal(err)
		}
	}
}

// A process killed mid-session (the writer never ran) resumes past every number it sent, at
// the reservation, and never above the incoming number it had reached; a clean stop resumes
// exactly, with every message kept.
func TestStoreResumesPastEveryNumberSent(t *testing.T) {
	t.Parallel()
	// Each case: whether the process stops cleanly, and where each number resumes.
	for _, tc := range []struct {
		name    string
		clean   bool
		out, in int
		msgs    int
	}{
		{name: "killed", clean: false, out: 31, in: 1, msgs: 0}, // 25 sent with blocks of 10: reserved to 31
		{name: "stopped", clean: true, out: 26, in: 6, msgs: 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := storeSession()
			s := openStore(t, id, 10, time.Hour) // the writer never commits by itself
			sendN(t, s, 25)
			for range 5 {
				if err := s.IncrNextTargetMsgSeqNum(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.clean {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				s.Crash()
			}
			if err := s.SaveMessageAndIncrNextSenderMsgSeqNum(26, []byte("late")); err == nil {
				t.Fatal("a stopped store handed out a number")
			}
			r := openStore(t, id, 10, time.Hour)
			defer r.Close()
			msgs, err := r.GetMessages(1, 100)
			if err != nil {
				t.Fatal(err)
			}
			if r.NextSenderMsgSeqNum() != tc.out || r.NextTargetMsgSeqNum() != tc.in || len(msgs) != tc.msgs {
				t.Fatalf("resumed at out %d in %d with %d messages; want %d %d %d", r.NextSenderMsgSeqNum(), r.NextTargetMsgSeqNum(), len(msgs), tc.out, tc.in, tc.msgs)
			}
		})
	}
}

// A process that opened the store before another used the session (a new holder started while
// the old one still held the session for a moment) logs on with the other's numbers: its
// Refresh at logon never writes its own stale outgoing number over theirs. Seen in the soak's
// FIX lane: the new holder's logons were all refused "MsgSeqNum too low", for minutes.
func TestRefreshNeverMovesAnotherProcesssNumberBack(t *testing.T) {
	t.Parallel()
	id := storeSession()
	first := openStore(t, id, 10, time.Hour)
	sendN(t, first, 3)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	late := openStore(t, id, 10, time.Hour) // reads out 4, before the other sends again
	defer late.Close()
	other := openStore(t, id, 10, time.Hour)
	sendN(t, other, 15) // 4..18, reserved past them
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // every logon attempt refreshes
		if err := late.Refresh(); err != nil {
			t.Fatal(err)
		}
		if got := late.NextSenderMsgSeqNum(); got != 19 {
			t.Fatalf("refresh %d: the late store logs on at outgoing %d; the other process sent up to 18", i+1, got)
		}
	}
	sendN(t, late, 2) // 19, 20
	if err := late.Close(); err != nil {
		t.Fatal(err)
	}
	r := openStore(t, id, 10, time.Hour)
	defer r.Close()
	if got := r.NextSenderMsgSeqNum(); got != 21 {
		t.Fatalf("resumed at outgoing %d, want 21", got)
	}
}

// A burst of messages is written in a few group commits, not one per message, and a resend
// reads them all back in order.
func TestStoreGroupCommitsABurst(t *testing.T) {
	t.Parallel()
	id := storeSession()
	s := openStore(t, id, 1000, 20*time.Millisecond)
	defer s.Close()
	const n = 300
	var mu sync.Mutex // the library's send lock
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			mu.Lock()
			defer mu.Unlock()
			seq := s.NextSenderMsgSeqNum()
			if err := s.SaveMessageAndIncrNextSenderMsgSeqNum(seq, body(seq)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, rows := s.Commits(); rows < n; _, rows = s.Commits() {
		if time.Now().After(deadline) {
			t.Fatalf("the writer wrote %d of %d messages", rows, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if batches, _ := s.Commits(); batches > n/10 {
		t.Fatalf("%d messages took %d commits; want them grouped", n, batches)
	}
	var stored int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_messages` WHERE `sendercompid` = ?", id.SenderCompID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.GetMessages(1, n)
	if err != nil || stored != n || len(msgs) != n || !bytes.Equal(msgs[0], body(1)) || !bytes.Equal(msgs[n-1], body(n)) {
		t.Fatalf("%d rows, %d messages read back (%v)", stored, len(msgs), err)
	}
}

// A resend over numbers whose messages a crash lost: the ones kept are handed out, and the
// last number asked for, when it has no message, gets a Heartbeat placeholder the library
// skips and covers with a gap fill (its resend gap-fills a missing number only before a later
// message).
func TestStoreResendOfLostTailHasAPlaceholder(t *testing.T) {
	t.Parallel()
	id := storeSession()
	s := openStore(t, id, 1000, time.Hour)
	sendN(t, s, 5)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	sendN(t, s, 5) // 6..10, lost
	s.Crash()
	r := openStore(t, id, 1000, time.Hour)
	defer r.Close()
	sendN(t, r, 1) // the logon, at the reservation
	msgs, err := r.GetMessages(3, 9)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || !bytes.Equal(msgs[2], body(5)) || !strings.Contains(string(msgs[3]), "\x0135=0\x01") || !strings.Contains(string(msgs[3]), "\x0134=9\x01") {
		t.Fatalf("resend 3-9 read %q; want 3, 4, 5 and a placeholder numbered 9", msgs)
	}
	m := quickfix.NewMessage()
	if err := quickfix.ParseMessage(m, bytes.NewBuffer(msgs[3])); err != nil {
		t.Fatalf("the placeholder does not parse: %v", err)
	}
}

// A stored message the library cannot parse — a truncated row, on which QuickFIX/Go v0.9.10's
// parser panics — is left out of a resend, which the library covers with a gap fill; the
// messages around it are resent.
func TestStoreResendLeavesOutAMessageThatDoesNotParse(t *testing.T) {
	t.Parallel()
	id := storeSession()
	s := openStore(t, id, 1000, time.Hour)
	defer s.Close()
	sendN(t, s, 3)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_fix_messages` SET `message` = ? WHERE `sendercompid` = ? AND `msgseqnum` = 2", "8=FIX.4.4\x019=5\x01", id.SenderCompID); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.GetMessages(1, 3)
	if err != nil || len(msgs) != 2 || !bytes.Equal(msgs[0], body(1)) || !bytes.Equal(msgs[1], body(3)) {
		t.Fatalf("resend 1-3 read %q (%v); want 1 and 3, the truncated 2 left out", msgs, err)
	}
}

// Reset drops every message and starts both numbers at 1, also for the next holder.
func TestStoreResetStartsAtOne(t *testing.T) {
	t.Parallel()
	id := storeSession()
	s := openStore(t, id, 10, time.Millisecond)
	sendN(t, s, 12)
	before := s.CreationTime()
	time.Sleep(1100 * time.Millisecond) // the creation time has a resolution of a second
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if !s.CreationTime().After(before) {
		t.Fatalf("creation time %s not after %s", s.CreationTime(), before)
	}
	s.Crash()
	r := openStore(t, id, 10, time.Hour)
	defer r.Close()
	msgs, _ := r.GetMessages(1, 100)
	if r.NextSenderMsgSeqNum() != 1 || r.NextTargetMsgSeqNum() != 1 || len(msgs) != 0 || !r.CreationTime().Equal(s.CreationTime()) {
		t.Fatalf("after a reset: out %d in %d, %d messages, created %s (reset at %s)", r.NextSenderMsgSeqNum(), r.NextTargetMsgSeqNum(), len(msgs), r.CreationTime(), s.CreationTime())
	}
}

// The desk crashed: the bodies of two orders it sent were lost, its outgoing number resumes
// at the reservation, and the venue (its side set back, as if it never got the three orders)
// asks for them again. The library resends the order it has and gap-fills the rest; the venue
// catches up, the session keeps trading, and each order executed once.
func TestCrashLostBodiesAreGapFilledOnResend(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	var clids []string
	for range 3 {
		clids = append(clids, orderID())
		if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: clids[len(clids)-1], Symbol: "EURUSD", Units: dd("1000")}); err != nil {
			t.Fatal(err)
		}
	}
	desk := r.session.SessionID()
	r.halt()
	orders := sentOrders(t, desk.SenderCompID)
	if len(orders) != 3 {
		t.Fatalf("%d orders stored, want 3", len(orders))
	}
	if _, err := testDB.Exec("DELETE FROM `fx_fix_messages` WHERE `sendercompid` = ? AND `msgseqnum` IN (?, ?)", desk.SenderCompID, orders[1], orders[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Exec("UPDATE `fx_fix_sessions` SET `outgoing_seqnum` = `outgoing_seqnum` + 40 WHERE `sendercompid` = ?", desk.SenderCompID); err != nil {
		t.Fatal(err)
	}
	venueSide := quickfix.SessionID{BeginString: desk.BeginString, SenderCompID: desk.TargetCompID, TargetCompID: desk.SenderCompID}
	if err := quickfix.SetNextTargetMsgSeqNum(venueSide, orders[0]); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	r.log = slog.New(ev)
	r.start(t, 5*time.Second)
	// The venue catches up: it expects what the desk sends next.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		want, _ := quickfix.GetExpectedSenderNum(desk)
		got, _ := quickfix.GetExpectedTargetNum(venueSide)
		if got == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the venue expects %d, the desk sends %d next; events %q: the gap was not filled", got, want, ev.list)
		}
	}
	if !ev.has(fmt.Sprintf("Resending Message: %d", orders[0])) || !ev.has("Sent SequenceReset TO:") {
		t.Fatalf("events %q: want the kept order resent and the rest gap-filled", ev.list)
	}
	id := orderID()
	if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: id, Symbol: "EURUSD", Units: dd("1000")}); err != nil {
		t.Fatalf("an order after the resend: %v; events %q", err, ev.list)
	}
	for _, c := range append(clids, id) {
		if n := countOrders(r.venue, c); n != 1 {
			t.Fatalf("order %s executed %d times at the venue", c, n)
		}
	}
}

// The desk crashed before its writer saved the incoming number: it resumes lower, asks the
// venue to resend, and the execution reports delivered twice are journaled once.
func TestReportsResentAfterACrashAreBookedOnce(t *testing.T) {
	r := newRig(t, 5*time.Second)
	ctx := context.Background()
	var clids []string
	for range 3 {
		clids = append(clids, orderID())
		if _, err := r.session.PlaceMarket(ctx, venue.MarketOrder{ClientID: clids[len(clids)-1], Symbol: "EURUSD", Units: dd("1000")}); err != nil {
			t.Fatal(err)
		}
	}
	desk := r.session.SessionID()
	r.halt()
	before := seqNums(t, desk.SenderCompID)
	if _, err := testDB.Exec("UPDATE `fx_fix_sessions` SET `incoming_seqnum` = `incoming_seqnum` - 6 WHERE `sendercompid` = ?", desk.SenderCompID); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	r.log = slog.New(ev)
	r.start(t, 5*time.Second)
	venueSide := quickfix.SessionID{BeginString: desk.BeginString, SenderCompID: desk.TargetCompID, TargetCompID: desk.SenderCompID}
	deadline := time.Now().Add(10 * time.Second)
	for {
		next, _ := quickfix.GetExpectedTargetNum(desk)
		sent, _ := quickfix.GetExpectedSenderNum(venueSide)
		if next == sent && next > before[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the desk expects %d, the venue sends %d next (was %d before the crash)", next, sent, before[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !ev.has(fmt.Sprintf("Sent ResendRequest FROM: %d", before[1]-6)) {
		t.Fatalf("the desk did not ask for the reports again; events %q", ev.list)
	}
	for _, c := range clids {
		var execs int
		if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_execution` WHERE `clOrdId` = ?", c).Scan(&execs); err != nil {
			t.Fatal(err)
		}
		if execs != 1 {
			t.Fatalf("order %s journaled %d executions, want 1", c, execs)
		}
	}
}

// sentOrders is the sequence numbers of the NewOrderSingles stored for the desk's session.
func sentOrders(t *testing.T, sender string) []int {
	t.Helper()
	rows, err := testDB.Query("SELECT `msgseqnum` FROM `fx_fix_messages` WHERE `sendercompid` = ? AND LOCATE(CONCAT(CHAR(1), '35=D', CHAR(1)), `message`) > 0 ORDER BY `msgseqnum`", sender)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// events records the library's session events the desk logs (at debug).
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) Enabled(context.Context, slog.Level) bool { return true }
func (e *events) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" {
			e.mu.Lock()
			e.list = append(e.list, a.Value.String())
			e.mu.Unlock()
		}
		return true
	})
	return nil
}
func (e *events) WithAttrs([]slog.Attr) slog.Handler { return e }
func (e *events) WithGroup(string) slog.Handler      { return e }

// has is whether an event starting with prefix was logged.
func (e *events) has(prefix string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.list {
		if strings.HasPrefix(ev, prefix) {
			return true
		}
	}
	return false
}
