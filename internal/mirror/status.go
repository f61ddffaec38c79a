package mirror

import "time"

// Mode is which half of the mirror a process runs.
type Mode string

const (
	Publishing Mode = "publishing" // the lease holder of a split install
	Following  Mode = "following"  // fxdesk-cron
)

// Status is the mirror as the desk page shows it. Publisher and Follower fill the fields that
// apply to them.
type Status struct {
	Mode       Mode   `json:"mode"`
	Key        string `json:"key"`
	IntervalMs int64  `json:"intervalMs"`
	// LastPublishedAt is the publishedAt of the last snapshot written (publisher) or read
	// (follower), on the leader's clock; zero when there is none.
	LastPublishedAt time.Time `json:"lastPublishedAt"`
	// AgeMs: publisher, time since its last successful publish; follower, how old the current
	// snapshot is (time in Redis before it was first seen + time since, on the follower's clock).
	AgeMs   int64 `json:"ageMs"`
	Symbols int   `json:"symbols"`
	// Dropped is how many symbols the last snapshot left out over the cap (publisher).
	Dropped int `json:"dropped"`
	// Bytes is the size of the last snapshot.
	Bytes int `json:"bytes"`
	// LastCycleMs is how long the last publish or poll took.
	LastCycleMs float64 `json:"lastCycleMs"`
	// Cycles counts the publishes or polls completed since the process started, failed ones
	// included: that the follower is polling at all, whatever it found.
	Cycles uint64 `json:"cycles"`
	// Advancing is false when the follower has no snapshot or has seen the same one for more than
	// two intervals (the condition behind quote-mirror-unavailable).
	Advancing bool `json:"advancing"`
	// Pinned: publisher, the legs followers asked for that it subscribes; follower, the legs it
	// keeps asking for.
	Pinned []string `json:"pinned"`
	// Term is the lease term of the snapshot last written (publisher) or served (follower).
	Term int64 `json:"term"`
	// TermRefused counts the publishes Redis refused because the stored snapshot carried a
	// newer term (publisher: another process holds the lease), or the snapshots the follower
	// refused because their term was older than one it had already seen (follower).
	TermRefused uint64 `json:"termRefused"`
	// Refused lists symbols the follower refuses for age while their session is open.
	Refused   []string `json:"refused,omitempty"`
	LastError string   `json:"lastError,omitempty"`
}
