package invariant

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// feedsFixture is a table of events of two users, 1001 (accounts 1 and 3) and 1002 (account 2),
// interleaved in commit order.
func feedsFixture() *Snapshot {
	rows := []struct {
		user, account int64
		typ           string
	}{
		{1001, 1, "balance.deposit"}, {1002, 2, "balance.deposit"}, {1001, 1, "order.filled"}, {1001, 1, "position.opened"},
		{1002, 2, "order.filled"}, {1002, 2, "position.opened"}, {1001, 3, "balance.deposit"}, {1001, 1, "position.closed"},
		{1002, 2, "balance.withdrawal"}, {1001, 3, "swap.charged"},
	}
	s := &Snapshot{}
	for i, r := range rows {
		s.Events = append(s.Events, dbEvent{ID: int64(i + 1), Account: r.account, User: r.user, Type: r.typ, Payload: "{}"})
	}
	return s
}

// seenOf is what a faithful stream of user after after up to upTo delivers.
func seenOf(s *Snapshot, user, after, upTo int64) []SeenEvent {
	var out []SeenEvent
	for _, e := range s.Events {
		if e.User == user && e.ID > after && e.ID <= upTo {
			out = append(out, SeenEvent{ID: e.ID, Type: e.Type, Account: e.Account})
		}
	}
	return out
}

func faithfulClients(s *Snapshot) []StreamClient {
	return []StreamClient{
		{Client: "t1", User: 1001, After: 0, UpTo: 10, Seen: seenOf(s, 1001, 0, 10), Connects: 3},
		{Client: "t2", User: 1002, After: 2, UpTo: 9, Seen: seenOf(s, 1002, 2, 9), Connects: 1},
	}
}

func TestEventStreamsFaithful(t *testing.T) {
	s := feedsFixture()
	r := CheckEventStreams(s, faithfulClients(s))
	if len(r.Violations) > 0 {
		t.Fatalf("faithful streams judged broken: %v", r.Violations)
	}
	if want := "2 clients, 9 events seen, 2 resumes"; r.Figures != want {
		t.Errorf("figures %q, want %q", r.Figures, want)
	}
	// An event seen past the newest waited for (it committed in the meantime) is no violation.
	cs := faithfulClients(s)
	cs[0].UpTo = 8
	if r := CheckEventStreams(s, cs); len(r.Violations) > 0 {
		t.Errorf("an event seen past UpTo judged broken: %v", r.Violations)
	}
}

func TestEventStreamsBroken(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(s *Snapshot, cs []StreamClient)
		want   string
	}{
		{"an event received twice across a resume", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen = slices.Insert(cs[0].Seen, 2, cs[0].Seen[1])
		}, "received 1 events twice: 3"},
		{"events out of order", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen[1], cs[0].Seen[2] = cs[0].Seen[2], cs[0].Seen[1]
		}, "out of order: 3(after 4)"},
		{"an event missed in the middle", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen = slices.Delete(cs[0].Seen, 2, 3)
		}, "missed 1 of its user's 6 events up to 10: 4"},
		{"the last events never arrived", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen = cs[0].Seen[:4]
		}, "ended at event 7, short of its user's newest 10"},
		{"another user's event", func(s *Snapshot, cs []StreamClient) {
			cs[1].Seen = append([]SeenEvent{{ID: 3, Type: "order.filled", Account: 1}}, cs[1].Seen...)
		}, "not its user's after its start: 3"},
		{"an event before the start", func(s *Snapshot, cs []StreamClient) {
			cs[1].Seen = append([]SeenEvent{{ID: 2, Type: "balance.deposit", Account: 2}}, cs[1].Seen...)
		}, "not its user's after its start: 2"},
		{"an event of no row", func(s *Snapshot, cs []StreamClient) {
			cs[1].Seen = append(cs[1].Seen, SeenEvent{ID: 11, Type: "balance.deposit", Account: 2})
		}, "not its user's after its start: 11"},
		{"a type unlike the row", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen[0].Type = "balance.withdrawal"
		}, "1 as balance.withdrawal of account 1 (table: balance.deposit of account 1)"},
		{"an account unlike the row", func(s *Snapshot, cs []StreamClient) {
			cs[0].Seen[3].Account = 1
		}, "7 as balance.deposit of account 1 (table: balance.deposit of account 3)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := feedsFixture()
			cs := faithfulClients(s)
			tc.mutate(s, cs)
			r := CheckEventStreams(s, cs)
			if !anyContains(r.Violations, tc.want) {
				t.Fatalf("want a violation containing %q, got %v", tc.want, r.Violations)
			}
		})
	}
}

// faithfulStream is the Redis Stream the relay writes of s, all relayed.
func faithfulStream(s *Snapshot) RedisStream {
	rs := RedisStream{Target: 10, Position: 10}
	for _, e := range s.Events {
		rs.Entries = append(rs.Entries, StreamEntry{EntryID: strconv.FormatInt(e.ID, 10) + "-0", ID: e.ID, Account: e.Account, User: e.User, Type: e.Type})
	}
	return rs
}

func TestRedisStreamFaithful(t *testing.T) {
	s := feedsFixture()
	r := CheckRedisStream(s, faithfulStream(s))
	if len(r.Violations) > 0 {
		t.Fatalf("a faithful stream judged broken: %v", r.Violations)
	}
	// An event committed after the wait and not yet relayed is no violation.
	rs := faithfulStream(s)
	rs.Target, rs.Position, rs.Entries = 9, 9, rs.Entries[:9]
	if r := CheckRedisStream(s, rs); len(r.Violations) > 0 {
		t.Errorf("an event past the position judged missing: %v", r.Violations)
	}
}

func TestRedisStreamBroken(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(rs *RedisStream)
		want   string
	}{
		{"an entry missing", func(rs *RedisStream) { rs.Entries = slices.Delete(rs.Entries, 4, 5) }, "table events up to 10 without an entry: 5"},
		{"the relay short of the table", func(rs *RedisStream) { rs.Position, rs.Entries = 8, rs.Entries[:8] }, "relay's position stayed at 8, short of the table's newest event 10"},
		{"the tail missing though the position passed it", func(rs *RedisStream) { rs.Entries = rs.Entries[:8] }, "without an entry: 9 10"},
		{"an event twice", func(rs *RedisStream) { rs.Entries = slices.Insert(rs.Entries, 3, rs.Entries[2]) }, "1 event ids with more than one entry: 3"},
		{"out of order", func(rs *RedisStream) { rs.Entries[3], rs.Entries[4] = rs.Entries[4], rs.Entries[3] }, "entries out of id order: 4(after 5)"},
		{"an entry of no event", func(rs *RedisStream) {
			rs.Entries = append(rs.Entries, StreamEntry{EntryID: "11-0", ID: 11, Account: 1, User: 1001, Type: "balance.deposit"})
		}, "1 entries of no table event: 11-0"},
		{"a type unlike the event", func(rs *RedisStream) { rs.Entries[0].Type = "order.filled" }, "1-0 (id 1, order.filled"},
		{"an account unlike the event", func(rs *RedisStream) { rs.Entries[6].Account = 1 }, "7-0 (id 7, balance.deposit, account 1"},
		{"a user unlike the event", func(rs *RedisStream) { rs.Entries[1].User = 1001 }, "2-0 (id 2, balance.deposit, account 2, user 1001"},
		{"an entry id unlike its event id", func(rs *RedisStream) { rs.Entries[0].EntryID = "1-1" }, "1-1 (id 1"},
		{"an unreadable entry", func(rs *RedisStream) { rs.Entries[0].Unreadable = "no field id" }, "cannot be read: 1-0: no field id"},
		{"an unreadable stream", func(rs *RedisStream) { rs.Err = "connection refused" }, "could not be read: connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := feedsFixture()
			rs := faithfulStream(s)
			tc.mutate(&rs)
			r := CheckRedisStream(s, rs)
			if !anyContains(r.Violations, tc.want) {
				t.Fatalf("want a violation containing %q, got %v", tc.want, r.Violations)
			}
		})
	}
}

func anyContains(vs []Violation, s string) bool {
	for _, v := range vs {
		if strings.Contains(v.Text, s) {
			return true
		}
	}
	return false
}
