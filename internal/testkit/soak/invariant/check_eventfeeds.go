package invariant

import "fmt"

// SeenEvent is one event as a client of the trader's events stream received it: the frame's id,
// its event: type and the accountId of its data.
type SeenEvent struct {
	ID      int64
	Type    string
	Account int64
}

// StreamClient is what one trader's events stream client recorded over a whole soak: it opened
// its first stream after After and, at the end, waited until it had its user's newest event UpTo
// (the newest id of the user in the database once the desk went quiet).
type StreamClient struct {
	Client string
	User   int64
	After  int64
	UpTo   int64
	// Seen are the events it received, in arrival order, across every stream it opened.
	Seen []SeenEvent
	// Connects are the streams the desk accepted (the first and every resume); Refused the
	// attempts answered with anything but 200 or not at all.
	Connects, Refused int
}

// StreamEntry is one entry of the install's Redis Stream of events: its entry id and the fields
// the checks compare with the table.
type StreamEntry struct {
	EntryID           string
	ID, Account, User int64
	Type              string
	Unreadable        string // a field missing or not a number ("": every field read)
}

// RedisStream is the whole Redis Stream as the soak read it at the end, and the relay's position
// (fx_event_relay 'stream') it waited for: Target is the table's newest id when it began to wait,
// Position the relay's position when it stopped waiting.
type RedisStream struct {
	Entries          []StreamEntry
	Target, Position int64
	// Err is why the stream could not be read ("": it was read whole).
	Err string
}

// The trader's events stream tells every event of the caller's accounts once, in order, across
// resumes (docs/architecture.md, «Events»): for each client the soak held open, what it saw is
// exactly the table's events of its user after its start — increasing ids, none twice, none
// missing, each with its type and account — up to the newest it waited for at the end (and any
// later one it saw).
func CheckEventStreams(s *Snapshot, clients []StreamClient) Result {
	r := Result{Name: "eventStreams"}
	byID := map[int64]dbEvent{}
	for _, e := range s.Events {
		byID[e.ID] = e
	}
	seenTotal, resumes := 0, 0
	for _, c := range clients {
		seenTotal += len(c.Seen)
		resumes += max(c.Connects-1, 0)
		upTo := c.UpTo
		got := map[int64]bool{}
		var last int64 = c.After
		var disorder, twice, foreign, wrong []string
		for _, e := range c.Seen {
			upTo = max(upTo, e.ID)
			switch {
			case got[e.ID]:
				twice = append(twice, fmt.Sprint(e.ID))
			case e.ID <= last:
				disorder = append(disorder, fmt.Sprintf("%d(after %d)", e.ID, last))
			}
			got[e.ID] = true
			last = max(last, e.ID)
			row, ok := byID[e.ID]
			switch {
			case !ok || row.User != c.User || e.ID <= c.After:
				foreign = append(foreign, fmt.Sprint(e.ID))
			case row.Type != e.Type || row.Account != e.Account:
				wrong = append(wrong, fmt.Sprintf("%d as %s of account %d (table: %s of account %d)", e.ID, e.Type, e.Account, row.Type, row.Account))
			}
		}
		var missing []string
		want := 0
		for _, e := range s.Events {
			if e.User != c.User || e.ID <= c.After || e.ID > upTo {
				continue
			}
			want++
			if !got[e.ID] {
				missing = append(missing, fmt.Sprint(e.ID))
			}
		}
		who := fmt.Sprintf("stream client %s (user %d, after %d, %d streams)", c.Client, c.User, c.After, c.Connects)
		if len(twice) > 0 {
			r.Add(c.Client+":twice", "%s received %d events twice: %s", who, len(twice), list(twice))
		}
		if len(disorder) > 0 {
			r.Add(c.Client+":order", "%s received %d events out of order: %s", who, len(disorder), list(disorder))
		}
		if len(foreign) > 0 {
			r.Add(c.Client+":foreign", "%s received %d events that are not its user's after its start: %s", who, len(foreign), list(foreign))
		}
		if len(wrong) > 0 {
			r.Add(c.Client+":wrong", "%s received %d events unlike their rows: %s", who, len(wrong), list(wrong))
		}
		if len(missing) > 0 {
			r.Add(c.Client+":missing", "%s missed %d of its user's %d events up to %d: %s", who, len(missing), want, upTo, list(missing))
		}
		if c.UpTo > 0 && last < c.UpTo {
			r.Add(c.Client+":short", "%s ended at event %d, short of its user's newest %d", who, last, c.UpTo)
		}
	}
	r.Figures = fmt.Sprintf("%d clients, %d events seen, %d resumes", len(clients), seenTotal, resumes)
	return r
}

// The Redis Stream holds every event of the table once, in order, and nothing else
// (docs/architecture.md, «Events»): once the relay's position reached the table's newest id,
// each entry is <id>-0 of a table event with its type, account and user, ids increase, and
// every table event up to the relay's position (or the last entry, or the newest id waited for)
// has its entry. The soak's desk keeps the default bounded length (1,000,000 entries), so a soak
// never trims the stream.
func CheckRedisStream(s *Snapshot, rs RedisStream) Result {
	r := Result{Name: "redisStream"}
	r.Figures = fmt.Sprintf("%d entries, %d table events, relay at %d of %d", len(rs.Entries), len(s.Events), rs.Position, rs.Target)
	if rs.Err != "" {
		r.Add("read", "the Redis Stream could not be read: %s", rs.Err)
		return r
	}
	if rs.Position < rs.Target {
		r.Add("position", "the relay's position stayed at %d, short of the table's newest event %d", rs.Position, rs.Target)
	}
	byID := map[int64]dbEvent{}
	for _, e := range s.Events {
		byID[e.ID] = e
	}
	upTo := max(rs.Target, rs.Position)
	got := map[int64]int{}
	var last int64
	var twice, disorder, extra, wrong, unreadable []string
	for _, e := range rs.Entries {
		if e.Unreadable != "" {
			unreadable = append(unreadable, e.EntryID+": "+e.Unreadable)
			continue
		}
		upTo = max(upTo, e.ID)
		got[e.ID]++
		switch {
		case got[e.ID] > 1:
			twice = append(twice, fmt.Sprint(e.ID))
		case e.ID <= last:
			disorder = append(disorder, fmt.Sprintf("%d(after %d)", e.ID, last))
		}
		last = max(last, e.ID)
		row, ok := byID[e.ID]
		switch {
		case !ok && s.Scope.Prefilled() && e.Account < s.Scope.FirstAccount:
			// An event the desk wrote for a pre-filled account (a swap, a stop-out), outside the
			// scope the snapshot reads.
		case !ok:
			extra = append(extra, e.EntryID)
		case e.EntryID != fmt.Sprintf("%d-0", e.ID) || row.Type != e.Type || row.Account != e.Account || row.User != e.User:
			wrong = append(wrong, fmt.Sprintf("%s (id %d, %s, account %d, user %d; table: %s, account %d, user %d)",
				e.EntryID, e.ID, e.Type, e.Account, e.User, row.Type, row.Account, row.User))
		}
	}
	var missing []string
	for _, e := range s.Events {
		if e.ID <= upTo && got[e.ID] == 0 {
			missing = append(missing, fmt.Sprint(e.ID))
		}
	}
	for _, v := range []struct {
		key, what string
		rows      []string
	}{
		{"unreadable", "entries whose fields cannot be read", unreadable},
		{"twice", "event ids with more than one entry", twice},
		{"order", "entries out of id order", disorder},
		{"extra", "entries of no table event", extra},
		{"wrong", "entries unlike their event", wrong},
		{"missing", fmt.Sprintf("table events up to %d without an entry", upTo), missing},
	} {
		if len(v.rows) > 0 {
			r.Add(v.key, "%d %s: %s", len(v.rows), v.what, list(v.rows))
		}
	}
	return r
}
