package mirror

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/fx"
	"fxdesk/internal/redisname"
	"fxdesk/internal/tick"
)

// Snapshot format, version 1: one JSON document an operator reads with
// `redis-cli GET fx:quote-mirror:snapshot` (or pipes into jq), one symbol per line:
//
//	{"version":1,"publishedAt":"2026-12-01T18:20:10.123Z","term":7,"symbols":2,"quotes":{
//	"EURUSD":{"bid":"1.08501","ask":"1.08512","receivedAt":"2026-12-01T18:20:10.101Z"},
//	"USDJPY":{"bid":"151.201","ask":"151.215","receivedAt":"2026-12-01T18:20:09.870Z"}
//	}}
//
// publishedAt and receivedAt are the leader's clock (see stamp). Prices are decimal strings in the
// instrument's digits (see quoteJSON). term is the lease term of the publisher (0 when it was not
// told one). symbols counts the quotes, which are written in symbol order.
const snapshotVersion = 1

// keys are the mirror's two Redis keys and its nudge channel, resolved once from the install's
// redisname.Names. Each Redis operation touches one key, so the keys may live in different
// Cluster slots.
type keys struct {
	snapshot   string // string: the latest snapshot, SET with PX KeyTTL
	pins       string // hash: symbol → opaque stamp the follower changes on every refresh
	pinChannel string // pub/sub channel: "a follower just pinned something" (not a key)
}

func keysOf(n redisname.Names) keys {
	return keys{snapshot: n.QuoteMirrorSnapshot(), pins: n.QuoteMirrorPins(), pinChannel: n.QuoteMirrorPinRequests()}
}

// snapshotHead is the snapshot's header in the order it is written: version, publishedAt and term
// lead, so the guard script finds the term in the first bytes without decoding the document.
type snapshotHead struct {
	Version     int   `json:"version"`
	PublishedAt stamp `json:"publishedAt"`
	Term        int64 `json:"term"`
	Symbols     int   `json:"symbols"`
}

// guardScript is the fence in front of a publish. It runs inside the publish's MULTI/EXEC, right
// before SET NX of the new snapshot: it reads the stored snapshot's term from its header
// (GETRANGE, never a decode) and, unless that term is newer than ours, deletes the key so the SET
// NX that follows writes. When the stored term is newer it leaves the key, the SET NX writes
// nothing, and it answers that term; otherwise 0. The transaction makes the three one step: no
// reader sees the key missing, no other writer gets in between. The snapshot itself is not a
// script argument: passing 420 KB into Lua measured about three plain SETs.
//
// Term 0 is not fenced, as termFence says.
//
// KEYS[1] snapshot key; ARGV[1] our term.
var guardScript = redis.NewScript(`
local ours = tonumber(ARGV[1])
if ours > 0 then
  local head = redis.call('GETRANGE', KEYS[1], 0, 127)
  local stored = tonumber(string.match(head, '^{"version":1,"publishedAt":"[^"]*","term":(%d+)'))
  if stored and stored > ours then
    return stored
  end
end
redis.call('DEL', KEYS[1])
return 0
`)

// entry is one symbol's quote to publish.
type entry struct {
	symbol string
	q      tick.Quote
}

// appendSnapshot appends the snapshot of entries (sorted, publishable) to b. encoding/json
// writes every value; the layout around them puts one symbol on a line, which encoding/json
// alone would not (it compacts what a Marshaler returns), so that `redis-cli GET` reads as a
// table.
func appendSnapshot(b []byte, head snapshotHead, entries []entry, digits func(symbol string) int) ([]byte, error) {
	head.Version, head.Symbols = snapshotVersion, len(entries)
	h, err := json.Marshal(head)
	if err != nil {
		return b, err
	}
	b = append(b, h[:len(h)-1]...) // the header's fields, the object left open
	b = append(b, `,"quotes":{`+"\n"...)
	for i := range entries {
		if i > 0 {
			b = append(b, ",\n"...)
		}
		d := -1
		if digits != nil {
			d = digits(entries[i].symbol)
		}
		k, err := json.Marshal(entries[i].symbol)
		if err != nil {
			return b, err
		}
		v, err := json.Marshal(encodeQuote(&entries[i].q, d))
		if err != nil {
			return b, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, "\n}}"...), nil
}

// snapshot is a decoded snapshot.
type snapshot struct {
	publishedAt time.Time // leader clock; compare with Equal, never with the follower's clock
	term        int64
	bytes       int
	quotes      map[string]heldQuote
}

// heldQuote is one quote of a snapshot as the leader held it.
type heldQuote struct {
	bid, ask   float64
	receivedAt time.Time // leader clock
}

var errNotSnapshot = errors.New("not a quote mirror snapshot (version 1 JSON)")

// parseSnapshot decodes raw, refusing anything but a whole version-1 snapshot of desk symbols
// and well-formed quotes, so a follower never serves a price it half understood.
func parseSnapshot(raw string) (*snapshot, error) {
	var doc struct {
		snapshotHead
		Quotes map[string]quoteJSON `json:"quotes"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotSnapshot, err)
	}
	switch {
	case doc.Version == 0:
		return nil, errNotSnapshot
	case doc.Version != snapshotVersion:
		return nil, fmt.Errorf("snapshot version %d, this follower reads %d (upgrade both processes together)", doc.Version, snapshotVersion)
	case time.Time(doc.PublishedAt).IsZero():
		return nil, errors.New("snapshot has no publishedAt")
	case doc.Term < 0:
		return nil, fmt.Errorf("snapshot term %d is negative", doc.Term)
	case doc.Symbols != len(doc.Quotes):
		return nil, fmt.Errorf("snapshot says %d quotes but holds %d", doc.Symbols, len(doc.Quotes))
	}
	s := &snapshot{publishedAt: time.Time(doc.PublishedAt), term: doc.Term, bytes: len(raw), quotes: make(map[string]heldQuote, len(doc.Quotes))}
	for sym, q := range doc.Quotes {
		bid, ask, at, ok := q.decode()
		if !fx.ValidSymbol(sym) || !ok {
			return nil, fmt.Errorf("snapshot quote %q is not a desk symbol with decimal bid and ask and a receivedAt", sym)
		}
		s.quotes[sym] = heldQuote{bid: bid, ask: ask, receivedAt: at}
	}
	return s, nil
}

// sortEntries orders entries by symbol and drops repeats.
func sortEntries(entries []entry) []entry {
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.symbol, b.symbol) })
	return slices.CompactFunc(entries, func(a, b entry) bool { return a.symbol == b.symbol })
}
