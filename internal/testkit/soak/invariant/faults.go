package invariant

import (
	"encoding/json"
	"strings"
	"time"

	"fxdesk/internal/swaps"
)

// What the soak's faults saw, beside their requests in the journal: when each was in effect, the
// rollover runs, the floods and the reused nonces.

// FaultCut is the kind of a window in which every MySQL or Redis connection was cut for a few
// seconds; its Note names which.
const FaultCut = "cut"

// FaultStop is the kind of a window in which the holder was SIGSTOPped past its lease's TTL and
// resumed with nobody having taken over.
const FaultStop = "stop"

// FaultZombie is the kind of a window in which the holder was SIGSTOPped until its lease expired,
// a replacement took the lease, and the old holder was resumed as a zombie (the window ends at
// the SIGCONT). The soak runs it right after another fault when the lane is late, so the holder
// it stops may have taken the lease moments before.
const FaultZombie = "zombie"

// FaultSentinelFailover is the kind of a window in which the Redis primary failed over to its
// replica: what the old primary had not passed on (a mirror snapshot, the lease key) is lost,
// and its writers rewrite it on their next cycle.
const FaultSentinelFailover = "sentinelFailover"

// FaultGaleraKill and FaultGaleraPartition are the kinds of the windows in which the Galera node
// HAProxy sent the desk to was killed, or a node was partitioned away (SIGSTOPped past the
// cluster's eviction timeout) until the cluster was whole again.
const (
	FaultGaleraKill      = "galeraKill"
	FaultGaleraPartition = "galeraPartition"
)

// DatabaseOutage reports whether window w may have kept the desk from its database: a MySQL cut,
// or a Galera fault. Meanwhile a web process honours a token it resolved before (auth.StaleFor),
// even one revoked since.
func DatabaseOutage(w Window) bool {
	return (w.Kind == FaultCut && w.Note == "mysql") || w.Kind == FaultGaleraKill || w.Kind == FaultGaleraPartition
}

// FaultFlood and FaultReusedNonce are the front-door faults' kinds.
const (
	FaultFlood       = "flood"
	FaultReusedNonce = "reusedNonce"
)

// FaultLostJournalReply is the kind of a window in which the answer to one COMMIT of the FIX
// journal (a transaction that recorded a venue execution) was dropped at the MySQL proxy, and
// that one connection then cut: the commit took effect, the desk was told it failed.
const FaultLostJournalReply = "lostJournalReply"

// LeaseFault reports whether a fault of kind may fail the lease holder's renews while it acts
// and a little after: every process fault (a kill, stop, zombie, cut, gap or rollover) and every
// cluster fault. A venue fault never reaches the lease, nor does a lost journal reply (one
// connection of the journal's, not the renew's); a front-door fault is what the flood check
// judges.
func LeaseFault(kind string) bool {
	return !strings.HasPrefix(kind, "venue") && kind != FaultFlood && kind != FaultReusedNonce && kind != FaultLostJournalReply
}

// RolloverRun is one `fxdesk-cron run processFxSwaps --at` process.
type RolloverRun struct {
	At     time.Time `json:"at"`
	PID    int       `json:"pid"` // the process's, which it names itself by in what it freezes (host:pid)
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	OK     bool      `json:"ok"` // exited 0: every due date was settled as of At
	Killed bool      `json:"killed"`
	Why    string    `json:"why"`
	Output string    `json:"output"`
}

// JobStart is when the run's job started, read from its output's "job ran", "job failed" or
// "job declined" line (the line's time less what the job took): right after the process read the
// quote mirror's snapshot. A run with no such line (killed before its job ended) gives its
// process's start.
func (r RolloverRun) JobStart() time.Time {
	if t, ok := r.jobStarted(); ok {
		return t
	}
	return r.Start
}

// jobStarted is JobStart read from the output alone: false for a run killed before its job line.
func (r RolloverRun) jobStarted() (time.Time, bool) {
	for _, line := range strings.Split(r.Output, "\n") {
		var l struct {
			Time time.Time     `json:"time"`
			Msg  string        `json:"msg"`
			Took time.Duration `json:"took"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && strings.HasPrefix(l.Msg, "job ") && !l.Time.IsZero() {
			return l.Time.Add(-l.Took), true
		}
	}
	return time.Time{}, false
}

// ScheduledSwapRuns are the processFxSwaps runs fxdesk-cron's own scheduler made at the top of
// each hour (its Spec, on the process's clock) while the soak ran, read from that process's log
// (its "job ran" and "job failed" lines: At and Start the scheduled instant, End the line's time).
// They charge the pending charges the soak's runs parked (and, past 17:00 New York, the day's
// rollover) at the mids of the process's own mirror follower, so a SWAP deal may be theirs rather
// than a one-off run's. A top of the hour passed with no line yet is a run still going: it ends
// now. Lines that do not parse are skipped.
func ScheduledSwapRuns(log string, now time.Time) []RolloverRun {
	var runs []RolloverRun
	var started time.Time
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Time time.Time     `json:"time"`
			Msg  string        `json:"msg"`
			Job  string        `json:"job"`
			At   time.Time     `json:"at"`
			Took time.Duration `json:"took"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Time.IsZero() {
			continue
		}
		if started.IsZero() {
			started = l.Time
		}
		if l.Job != swaps.JobName || (l.Msg != "job ran" && l.Msg != "job failed") {
			continue
		}
		at := l.At
		if at.IsZero() {
			at = l.Time.Add(-l.Took)
		}
		runs = append(runs, RolloverRun{At: at, Start: at, End: l.Time, OK: l.Msg == "job ran", Why: "scheduled", Output: line})
	}
	if started.IsZero() {
		return runs
	}
	for h := started.Truncate(time.Hour).Add(time.Hour); !h.After(now); h = h.Add(time.Hour) {
		ran := false
		for _, r := range runs {
			ran = ran || (!r.Start.Before(h.Add(-time.Minute)) && r.Start.Before(h.Add(time.Minute)))
		}
		if !ran {
			runs = append(runs, RolloverRun{At: h, Start: h, End: now, Why: "scheduled, running"})
		}
	}
	return runs
}

// Window is when a fault (or part of one) was in effect, for reading the checks.
type Window struct {
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Note  string    `json:"note,omitempty"`
	// PID is the desk process a kill, stop or zombie fault signalled (0 for other faults).
	PID int `json:"pid,omitempty"`
}

// Flood is what one flood saw, beside its requests in the journal.
type Flood struct {
	Target   string    `json:"target"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Streams  int       `json:"streams"`  // stream requests sent
	Accepted int       `json:"accepted"` // answered 200 and held
	// Holder is the lease holder when the flood began; HolderAfter when it ended.
	Holder, HolderAfter string
	// Judged: the holder's /metrics answered before and after (no process fault acts during a
	// flood, nor for a lease TTL before it), so its renews are the flood's to answer for — but a
	// renew that may have begun before another fault ended (LeaseFault) is that fault's.
	Judged        bool
	Before, After RenewRead
	// Reads are the holder's /metrics read between Before and After, every SampleEvery, in
	// order (a read that failed is left out): between two of them a renew ended.
	Reads []RenewRead `json:"reads,omitempty"`
	Why   string      `json:"why,omitempty"` // why not judged
}

// Reuse is one reusedNonce fault: the original order and the answer to its reuse.
type Reuse struct {
	Account int64
	Nonce   string
	OrderID int64 // the order the original request was answered with
	Seq     int64 // the reuse's journal entry
	Skipped string
}

// RenewCounts are a process's lease renew cycles by outcome, from its /metrics: how many, and
// the seconds the failed and the lost ones took in all (the renew histogram's sums).
type RenewCounts struct {
	OK, Failed, Lost           float64
	FailedSeconds, LostSeconds float64
}

// RenewRead is one read of a process's renew counters: they held at some instant between Sent
// and Recv.
type RenewRead struct {
	Sent, Recv time.Time
	RenewCounts
}
