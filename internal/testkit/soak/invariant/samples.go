package invariant

import (
	"time"

	"fxdesk/internal/lease"
)

// DeskSample is one process's /api/admin/fx/desk answer: the state at some instant between Sent
// and Recv.
type DeskSample struct {
	Proc        string    `json:"proc"`
	PID         int       `json:"pid"`
	Sent        time.Time `json:"sent"`
	Recv        time.Time `json:"recv"`
	Role        string    `json:"role"`
	HoldsLease  bool      `json:"holdsLease"`
	Term        int64     `json:"term"`
	TrustLeftMs int64     `json:"trustLeftMs"`
	Lost        bool      `json:"lost"`
	// Commits are the process's group commit counters (the holder's; nil on a process that never
	// held the desk).
	Commits *CommitCounts `json:"commits,omitempty"`
}

// CommitCounts are the group commit counters a process reports since it started.
type CommitCounts struct {
	Batches uint64 `json:"batches"`
	Writes  uint64 `json:"writes"`
	OneTrip uint64 `json:"oneTrip"`
	Stale   uint64 `json:"stale"`
	Split   uint64 `json:"split"`
	Retried uint64 `json:"retried"`
}

// RowSample is the lease row, read at At.
type RowSample struct {
	At  time.Time `json:"at"`
	OK  bool      `json:"ok"`
	Row LeaseRow  `json:"row"`
	Err string    `json:"err,omitempty"`
}

// MirrorSample is the mirror snapshot key, read at At.
type MirrorSample struct {
	At          time.Time          `json:"at"`
	Present     bool               `json:"present"`
	Term        int64              `json:"term"`
	PublishedAt string             `json:"publishedAt"`
	Mids        map[string]float64 `json:"mids,omitempty"`
	Err         string             `json:"err,omitempty"`
}

// LeaseRow is the lease row as the database clock sees it (lease.ReadRow).
type LeaseRow = lease.Holder
