package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/testkit/soak/invariant"
)

// The cluster faults (docs/cluster.md, «The cluster soak»), on a lane of their own from a
// generator of their own, each taking its turn among the process faults: a node kill, a
// partition and a failover each shut the holder's gate for a moment, and a takeover or a flood
// beside them would be judged by bounds made for one server.
const (
	faultGaleraKill       = invariant.FaultGaleraKill      // SIGKILL the Galera node HAProxy sends the desk to, restart it after a while
	faultGaleraPartition  = invariant.FaultGaleraPartition // SIGSTOP a Galera node past the cluster's eviction timeout, then SIGCONT
	faultSentinelFailover = invariant.FaultSentinelFailover
)

// clusterChoice is which clusters a soak runs the desk on (none: the single servers).
type clusterChoice struct{ galera, sentinel bool }

// parseClusters reads -cluster's value: a comma-separated list of galera and sentinel.
func parseClusters(names []string) (clusterChoice, error) {
	var ch clusterChoice
	for _, n := range names {
		switch strings.TrimSpace(n) {
		case "galera":
			ch.galera = true
		case "sentinel":
			ch.sentinel = true
		case "":
		default:
			return ch, fmt.Errorf("unknown cluster %q: the soak runs on galera and sentinel", n)
		}
	}
	return ch, nil
}

func (ch clusterChoice) any() bool { return ch.galera || ch.sentinel }

// kinds are the cluster faults that apply to the chosen clusters, in the summary's order.
func (ch clusterChoice) kinds() []string {
	var kinds []string
	if ch.galera {
		kinds = append(kinds, faultGaleraKill, faultGaleraPartition)
	}
	if ch.sentinel {
		kinds = append(kinds, faultSentinelFailover)
	}
	return kinds
}

func isClusterFault(kind string) bool {
	return kind == faultGaleraKill || kind == faultGaleraPartition || kind == faultSentinelFailover
}

// clusterSchedule draws the cluster faults: every kind once in a seeded order, then at random,
// 25–40 s apart from 15 s in. Each plays out for 10–25 s (a node down, then rejoining) holding
// the process lane's lock: closer, they would leave the lease's own faults little room.
func clusterSchedule(seed uint64, d time.Duration, kinds []string) []fault {
	if len(kinds) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, seed^0xc1a57e4))
	return drawLane(rng, kinds, 15*time.Second, 25000*time.Millisecond, 15000, d, func(f *fault) {
		switch f.Kind {
		case faultGaleraKill:
			f.DownFor = time.Duration(2000+rng.IntN(6000)) * time.Millisecond
		case faultGaleraPartition:
			// Past evs.inactive_timeout (6 s in scripts/cluster.sh): the others evict the node,
			// which rejoins as a new member when it runs again.
			f.Pause = time.Duration(7000+rng.IntN(6000)) * time.Millisecond
			f.Target = []string{"writer", "other"}[rng.IntN(2)]
		}
	})
}

// injectCluster runs one cluster fault, holding the process lane's lock until the cluster is
// whole again (every node Synced, the Sentinels' new primary serving).
func (in *injector) injectCluster(ctx context.Context, f fault) {
	in.serial.Lock()
	defer in.serial.Unlock()
	ha := in.c.ha
	// Never a fault on a cluster that has not healed from the last one: a second node down of
	// three is a lost quorum, which the desk is not asked to survive.
	if ha.onGalera {
		if err := ha.waitWhole(ctx, time.Minute); err != nil {
			in.fail("%s: not injected: %v", f.Kind, err)
			return
		}
	}
	t0 := time.Now()
	h := in.c.holder(ctx)
	var before invariant.RenewRead
	if h != nil {
		before, _ = in.c.readRenews(ctx, h)
	}
	var what []string
	switch f.Kind {
	case faultGaleraKill, faultGaleraPartition:
		n, err := ha.writer(ctx)
		if err != nil {
			in.fail("%s: %v", f.Kind, err)
			return
		}
		role := "the writer"
		if f.Kind == faultGaleraPartition && f.Target == "other" {
			for _, o := range ha.nodes {
				if o != n {
					n, role = o, "not the writer"
					break
				}
			}
		}
		if f.Kind == faultGaleraKill {
			if err := n.signal(syscall.SIGKILL); err != nil {
				in.fail("%s: %v", f.Kind, err)
				return
			}
			what = append(what, fmt.Sprintf("%s (%s) SIGKILLed", n.name, role))
			if err := n.gone(30 * time.Second); err != nil {
				in.fail("%s: %v", f.Kind, err)
			}
		} else {
			if err := n.signal(syscall.SIGSTOP); err != nil {
				in.fail("%s: %v", f.Kind, err)
				return
			}
			what = append(what, fmt.Sprintf("%s (%s) SIGSTOPped %s", n.name, role, f.Pause))
		}
		if role == "the writer" {
			if moved, err := in.endpointMoved(ctx, n, t0); err != nil {
				in.fail("%s: %v", f.Kind, err)
			} else {
				what = append(what, moved)
			}
		}
		if f.Kind == faultGaleraKill {
			time.Sleep(f.DownFor)
			t1 := time.Now()
			// The script starts what is down: the killed node recovers its position from
			// InnoDB and rejoins by IST (or SST when the donor's cache no longer covers it).
			if _, err := ha.script(ctx, "up"); err != nil {
				in.fail("%s: restart %s: %v", f.Kind, n.name, err)
			}
			what = append(what, fmt.Sprintf("down %s, restarted and Synced in %s", f.DownFor, time.Since(t1).Round(time.Millisecond)))
		} else {
			time.Sleep(time.Until(t0.Add(f.Pause)))
			n.signal(syscall.SIGCONT)
			t1 := time.Now()
			if err := ha.waitWhole(ctx, 2*time.Minute); err != nil {
				in.fail("%s: after SIGCONT of %s: %v", f.Kind, n.name, err)
			}
			what = append(what, fmt.Sprintf("resumed, rejoined and Synced in %s", time.Since(t1).Round(time.Millisecond)))
		}
		if err := ha.waitWhole(ctx, 2*time.Minute); err != nil {
			in.fail("%s: %v", f.Kind, err)
		}
	case faultSentinelFailover:
		what = in.sentinelFailover(ctx, t0)
	}
	// The desk must be serving again before the next fault: a lease holder that renews.
	if _, err := in.c.waitHolder(ctx, 15*time.Second, nil); err != nil {
		in.fail("%s: after the fault: %v", f.Kind, err)
	}
	end := time.Now()
	what = append(what, in.fillGap(t0, end))
	if h != nil && h.alive() {
		if after, err := in.c.readRenews(ctx, h); err == nil {
			what = append(what, fmt.Sprintf("holder %s renews +%.0f ok +%.0f failed +%.0f lost", h.name, after.OK-before.OK, after.Failed-before.Failed, after.Lost-before.Lost))
		}
	}
	note := strings.Join(what, "; ")
	in.log.Printf("soak: cluster: %s: %s", f.Kind, note)
	in.mu.Lock()
	in.recoveries = append(in.recoveries, f.Kind+": "+note)
	in.mu.Unlock()
	in.note(invariant.Window{Kind: f.Kind, Start: t0, End: end, Note: note})
}

// endpointMoved waits until a new connection through HAProxy lands on another node than n.
func (in *injector) endpointMoved(ctx context.Context, n galeraNode, t0 time.Time) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if w, err := in.c.ha.writer(ctx); err == nil && w != n {
			return fmt.Sprintf("HAProxy sent new connections to %s after %s", w.name, time.Since(t0).Round(time.Millisecond)), nil
		}
		time.Sleep(100 * time.Millisecond) // HAProxy's health checks announce nothing outside it
	}
	return "", fmt.Errorf("HAProxy still sends connections to %s 30 s after the fault", n.name)
}

// sentinelFailover asks a Sentinel to fail the Redis primary over and waits for the new primary
// to serve, the old one to be demoted and the quote mirror to be republished on the new one.
func (in *injector) sentinelFailover(ctx context.Context, t0 time.Time) []string {
	ha := in.c.ha
	old, err := ha.primary(ctx)
	if err != nil {
		in.fail("%s: %v", faultSentinelFailover, err)
		return nil
	}
	if err := ha.sentinels.Failover(ctx, ha.master).Err(); err != nil {
		in.fail("%s: SENTINEL FAILOVER %s: %v", faultSentinelFailover, ha.master, err)
		return nil
	}
	what := []string{"SENTINEL FAILOVER " + ha.master + " from " + old}
	// Each step is polled as an operator would (redis-cli ROLE, SENTINEL get-master-addr-by-name),
	// all at once, so each one's time is its own.
	var switched time.Time
	var primary string
	steps := []struct {
		what string
		done func() bool
		took time.Duration
	}{
		{what: "Sentinels named the new primary", done: func() bool {
			p, err := ha.primary(ctx)
			if err == nil && p != old {
				primary, switched = p, time.Now()
				return true
			}
			return false
		}},
		{what: "old primary a replica", done: func() bool {
			role, err := redisRole(ctx, old)
			return err == nil && role == "slave"
		}},
		{what: "mirror republished on the new primary", done: func() bool {
			if switched.IsZero() {
				return false
			}
			m := in.s.sampleMirror(ctx)
			at, err := time.Parse(time.RFC3339Nano, m.PublishedAt)
			return m.Present && err == nil && at.After(switched)
		}},
		{what: "lease key agrees with the row on the new primary", done: func() bool {
			if switched.IsZero() {
				return false
			}
			r, ok, err := in.c.readRow(ctx)
			key, kerr := in.redisLeaseKey(ctx)
			return err == nil && kerr == nil && ok && r.Live && key == r.String()
		}},
	}
	deadline := time.Now().Add(time.Minute)
	for left := len(steps); left > 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for i := range steps {
			if steps[i].took == 0 && steps[i].done() {
				steps[i].took, left = time.Since(t0), left-1
			}
		}
	}
	for _, st := range steps {
		if st.took == 0 {
			in.fail("%s: not within a minute: %s", faultSentinelFailover, st.what)
			continue
		}
		what = append(what, fmt.Sprintf("%s after %s", st.what, st.took.Round(time.Millisecond)))
	}
	if primary != "" {
		what = append(what, "new primary "+primary)
	}
	return what
}

// fillGap is what the journal shows of the desk's fills between start and end: the first one
// sent after start and the longest time between two fills.
func (in *injector) fillGap(start, end time.Time) string {
	var first time.Duration = -1
	var ends []time.Time
	for _, e := range in.j.snapshot() {
		if !strings.HasPrefix(e.Op, "open") || !e.OK() || e.End.Before(start) || e.Start.After(end) {
			continue
		}
		if e.Start.After(start) && (first < 0 || e.End.Sub(start) < first) {
			first = e.End.Sub(start)
		}
		ends = append(ends, e.End)
	}
	if first < 0 {
		return fmt.Sprintf("no fill in the %s of the fault", end.Sub(start).Round(time.Millisecond))
	}
	slices.SortFunc(ends, time.Time.Compare)
	last, gap := start, time.Duration(0)
	for _, t := range append(ends, end) {
		gap, last = max(gap, t.Sub(last)), t
	}
	return fmt.Sprintf("first fill %s after the fault began, longest gap between fills %s", first.Round(time.Millisecond), gap.Round(time.Millisecond))
}

// unknownOutcomes reads the journal for the unknown outcomes of the desk's orders during the
// Galera faults: an order whose COMMIT's connection died (a node killed or stopped under it,
// HAProxy cutting its sessions) is answered 504 outcome_unknown, or not at all before the
// client's timeout; the client sends it again with the same requestNonce. It counts them and
// how the retries ended; the nonces and answersInDB checks judge that no retry opened twice and
// that every 2xx is in the database.
func unknownOutcomes(journal []invariant.Entry, windows []invariant.Window) string {
	inGalera := func(e invariant.Entry) bool {
		for _, w := range windows {
			if (w.Kind == faultGaleraKill || w.Kind == faultGaleraPartition) && !e.Start.After(w.End) && !e.End.Before(w.Start) {
				return true
			}
		}
		return false
	}
	nonceOf := func(e invariant.Entry) string {
		var b struct {
			RequestNonce string `json:"requestNonce"`
		}
		if !strings.HasPrefix(e.Op, "open") || json.Unmarshal(e.Body, &b) != nil {
			return ""
		}
		return b.RequestNonce
	}
	answered504, timedOut := 0, 0
	unknown := map[string]bool{} // the nonces of those orders
	for _, e := range journal {
		nonce := nonceOf(e)
		if nonce == "" || !inGalera(e) {
			continue
		}
		switch {
		case e.Outcome == invariant.Answered && e.Status == http.StatusGatewayTimeout && e.ErrorMessage() == fx.MsgOutcomeUnknown:
			answered504++
		case e.Outcome == invariant.OutcomeUnknown:
			timedOut++
		default:
			continue
		}
		unknown[nonce] = true
	}
	resolved := map[string]bool{}
	for _, e := range journal {
		if nonce := nonceOf(e); unknown[nonce] && e.OK() {
			resolved[nonce] = true
		}
	}
	return fmt.Sprintf("orders of unknown outcome during the Galera faults: %d answered 504 outcome_unknown, %d unanswered within the client's timeout; "+
		"of their %d requestNonces, %d were answered 2xx when sent again with the same nonce", answered504, timedOut, len(unknown), len(resolved))
}
