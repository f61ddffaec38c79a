package soak

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/testkit/soak/invariant"
)

// Front-door faults (docs/architecture.md, «The front door»), on a lane of their own: an attacker
// against one web process, and a client reusing an idempotency key.
const (
	faultFlood       = invariant.FaultFlood       // streams past the token's cap, unknown tokens, bad bodies, at one web process
	faultReusedNonce = invariant.FaultReusedNonce // an accepted order's requestNonce sent again with another body
)

var frontDoorFaultKinds = []string{faultFlood, faultReusedNonce}

func isFrontDoorFault(kind string) bool { return kind == faultFlood || kind == faultReusedNonce }

// attackerAddress is the address the attacker's requests come from, one of its own
// (invariant.AttackerClient and invariant.AttackerUser name it in the journal and the database).
const attackerAddress = "203.0.113.66"

// frontDoorSchedule draws the front-door faults from a generator of their own (every kind once
// in a seeded order while there is room, then kinds at random, 5–9 s apart, from 12 s in to 15 s
// before the end), so a seed's process and venue faults are what they were before this lane.
func frontDoorSchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0xf00d0d00))
	return drawLane(rng, frontDoorFaultKinds, 12*time.Second, 5000*time.Millisecond, 4000, d, func(f *fault) {
		switch f.Kind {
		case faultFlood:
			f.Target = []string{"holder", "follower"}[rng.IntN(2)]
			f.Streams = invariant.StreamsPerToken + 1 + rng.IntN(8)
			f.HoldFor = time.Duration(2000+rng.IntN(3000)) * time.Millisecond
			f.Count = 50 + rng.IntN(200)
			// Past the token's burst, so its rate is reached however fast the target answers.
			f.Bodies = 4*invariant.RatePerToken + rng.IntN(2*invariant.RatePerToken)
		case faultReusedNonce:
			f.Pick = rng.Float64()
		}
	})
}

// readRenews reads p's lease renew counters from its /metrics (staff only on the API port: the
// viewer's token): the cycles by outcome, and the seconds the failed and the lost ones took.
func (c *cluster) readRenews(ctx context.Context, p *proc) (invariant.RenewRead, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rr := invariant.RenewRead{Sent: time.Now()}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+c.staff[auth.RoleViewer])
	resp, err := httpClient.Do(req)
	if err != nil {
		return rr, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rr, fmt.Errorf("/metrics on %s answered %d", p.name, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		count := strings.HasPrefix(name, "fxdesk_lease_renew_seconds_count{")
		if !ok || !count && !strings.HasPrefix(name, "fxdesk_lease_renew_seconds_sum{") {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch {
		case strings.Contains(name, `outcome="ok"`):
			if count {
				rr.OK = v
			}
		case strings.Contains(name, `outcome="failed"`):
			if count {
				rr.Failed = v
			} else {
				rr.FailedSeconds = v
			}
		case strings.Contains(name, `outcome="lost"`):
			if count {
				rr.Lost = v
			} else {
				rr.LostSeconds = v
			}
		}
	}
	rr.Recv = time.Now()
	return rr, sc.Err()
}

// readRenewsEvery reads p's renew counters every invariant.SampleEvery until ctx ends and
// returns the reads that were answered: between two of them a renew ended, so the flood check
// can tell when one that failed began.
func (c *cluster) readRenewsEvery(ctx context.Context, p *proc) []invariant.RenewRead {
	var reads []invariant.RenewRead
	t := time.NewTicker(invariant.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return reads
		case <-t.C:
		}
		if rr, err := c.readRenews(ctx, p); err == nil {
			reads = append(reads, rr)
		}
	}
}

// attackerHTTP is the attacker's own client: its streams hold connections the traders' pool
// must not lend out, and nothing of it is reused by anyone else.
// A stream that sends no status line in time is as good as refused for the attacker.
var attackerHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 5 * time.Second,
	ResponseHeaderTimeout: requestTimeout}}

// unknownToken is a token of the shape the desk issues that names nothing: it costs the desk a
// lookup (then its negative cache), unlike a malformed one.
func unknownToken() string {
	b := make([]byte, 32)
	crand.Read(b)
	return "fxd_" + base64.RawURLEncoding.EncodeToString(b)
}

// injectFrontDoor runs one front-door fault. It holds the process lane's lock: a flood's lease
// check is only exact with no kill, stop or cut beside it, and a reused nonce must meet a live
// holder to be answered at all.
func (in *injector) injectFrontDoor(ctx context.Context, f fault) {
	in.serial.Lock()
	defer in.serial.Unlock()
	switch f.Kind {
	case faultFlood:
		in.flood(ctx, f)
	case faultReusedNonce:
		in.reuseNonce(ctx, f)
	}
}

func (in *injector) flood(ctx context.Context, f fault) {
	// A renew under way through a kill, stop or cut fails a little after it: the flood starts a
	// lease TTL after the last one (none starts meanwhile, this lane holds the lock), so a failed
	// renew in its window is its own. The check does not take that on trust: it places each
	// failed renew by the holder's /metrics, read through the flood, and leaves one that may
	// have begun before another fault ended to that fault.
	if wait := leaseTTL - time.Since(in.lastProcessFault()); wait > 0 {
		time.Sleep(wait)
	}
	h := in.holderOrNote(ctx, f)
	if h == nil {
		return
	}
	target := h
	if f.Target == "follower" {
		for _, p := range in.c.live("web") {
			if p != h && !p.isStopped() {
				target = p
				break
			}
		}
	}
	run := invariant.Flood{Target: target.name, Holder: h.name, Streams: f.Streams}
	before, err := in.c.readRenews(ctx, h)
	run.Before = before
	if err != nil {
		run.Why = "holder's /metrics before: " + err.Error()
	}
	run.Start = time.Now()
	readsCtx, stopReads := context.WithCancel(ctx)
	reads := make(chan []invariant.RenewRead, 1)
	go func() { reads <- in.c.readRenewsEvery(readsCtx, h) }()

	// The streams, past the token's cap, held while the rest of the flood goes on.
	streamCtx, closeStreams := context.WithCancel(ctx)
	var streams sync.WaitGroup
	var mu sync.Mutex
	opened := make(chan struct{}, f.Streams)
	for range f.Streams {
		streams.Go(func() {
			in.stream(streamCtx, target, func(accepted bool) {
				if accepted {
					mu.Lock()
					run.Accepted++
					mu.Unlock()
				}
				opened <- struct{}{}
			})
		})
	}
	// Every stream has its answer before the bursts, so the cap is met by the streams alone.
	for range f.Streams {
		<-opened
	}
	var bursts []outgoing
	for range f.Count {
		bursts = append(bursts, outgoing{token: unknownToken(), op: "flood-badToken", method: http.MethodGet, path: "/api/fx/accounts"})
	}
	// Just past the bound: the whole body fits the socket's buffers, so the 413 is read, not lost
	// to a reset while the client still writes.
	big := make([]byte, invariant.BodyLimit+1+len(bursts)%4096)
	for i := range big {
		big[i] = ' '
	}
	big[0], big[len(big)-1] = '{', '}'
	for i := range f.Bodies {
		o := outgoing{token: in.c.attacker, method: http.MethodPost, path: "/api/fx/accounts", contentType: "application/json"}
		switch i % 6 {
		case 0:
			o.op, o.body = "flood-oversized", big
		case 1:
			o.op, o.body, o.contentType = "flood-contentType", []byte(`{"currency":"USD","leverage":100}`), "text/plain"
		default:
			// The key twice: last-wins JSON would make the account in the second currency.
			o.op, o.body = "flood-dupKey", []byte(`{"currency":"USD","currency":"EUR","leverage":100}`)
		}
		bursts = append(bursts, o)
	}
	work := make(chan outgoing)
	var workers sync.WaitGroup
	for range 16 {
		workers.Go(func() {
			for o := range work {
				o.client = invariant.AttackerClient
				in.j.send(ctx, attackerHTTP, target, o)
			}
		})
	}
	for i := range bursts {
		// Interleaved, so each kind meets the others' load.
		j := (i * 7919) % len(bursts)
		if ctx.Err() != nil {
			break
		}
		work <- bursts[j]
	}
	close(work)
	workers.Wait()
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(run.Start.Add(f.HoldFor))):
	}
	closeStreams()
	streams.Wait()
	run.End = time.Now()
	stopReads()
	run.Reads = <-reads

	after, err := in.c.readRenews(ctx, h)
	run.After = after
	if run.Why == "" && err != nil {
		run.Why = "holder's /metrics after: " + err.Error()
	}
	run.Judged = run.Why == ""
	if now := in.c.holder(ctx); now != nil {
		run.HolderAfter = now.name
	}
	in.mu.Lock()
	in.floods = append(in.floods, run)
	in.mu.Unlock()
	in.log.Printf("soak: flood on %s: %d of %d streams accepted, %d requests; holder %s renews ok +%.0f failed +%.0f lost +%.0f",
		target.name, run.Accepted, run.Streams, len(bursts), h.name, after.OK-before.OK, after.Failed-before.Failed, after.Lost-before.Lost)
	in.note(invariant.Window{Kind: f.Kind, Start: run.Start, End: run.End, Note: target.name})
}

// lastProcessFault is when the last process fault's window ended (a kill, stop or cut fails
// renews for a while after it; venue faults and front-door faults do not touch the lease).
func (in *injector) lastProcessFault() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	var last time.Time
	for _, w := range in.windows {
		if invariant.LeaseFault(w.Kind) && w.End.After(last) {
			last = w.End
		}
	}
	return last
}

// stream opens one markets-rail stream on p with the attacker's token and holds it until ctx
// ends; answered is told, once, whether the desk accepted it. Its journal entry ends at the
// status line.
func (in *injector) stream(ctx context.Context, p *proc, answered func(accepted bool)) {
	e := invariant.Entry{Client: invariant.AttackerClient, Op: "flood-stream", Proc: p.name, Method: http.MethodGet, Path: "/api/fx/markets/stream"}
	req, _ := http.NewRequestWithContext(ctx, e.Method, "http://"+p.addr+e.Path, nil)
	req.Header.Set("Authorization", "Bearer "+in.c.attacker)
	req.Header.Set("X-Forwarded-For", attackerAddress)
	e.Start = time.Now()
	resp, err := attackerHTTP.Do(req)
	e.End = time.Now()
	e.Outcome, e.Err = outcomeOf(err)
	if err != nil {
		in.j.add(e)
		answered(false)
		return
	}
	defer resp.Body.Close()
	e.Status, e.RetryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		e.Resp = invariant.JSONOrString(b)
		in.j.add(e)
		answered(false)
		return
	}
	in.j.add(e)
	answered(true)
	// Read, slowly enough to hold the stream, fast enough not to be dropped as a slow reader.
	b := make([]byte, 32<<10)
	for ctx.Err() == nil {
		if _, err := resp.Body.Read(b); err != nil {
			break
		}
	}
}

// reuseNonce sends an order the journal saw accepted again, under its requestNonce, with
// another volume and no stops: the desk must refuse it 422 and write nothing.
func (in *injector) reuseNonce(ctx context.Context, f fault) {
	var accepted []invariant.Entry
	for _, e := range in.j.snapshot() {
		if strings.HasPrefix(e.Op, "open") && e.OK() {
			accepted = append(accepted, e)
		}
	}
	r := invariant.Reuse{}
	defer func() {
		in.mu.Lock()
		in.reuses = append(in.reuses, r)
		in.mu.Unlock()
	}()
	if len(accepted) == 0 {
		r.Skipped = "no accepted order yet"
		return
	}
	e := accepted[min(int(f.Pick*float64(len(accepted))), len(accepted)-1)]
	var body map[string]any
	var ans struct {
		Order struct {
			ID int64 `json:"id"`
		} `json:"order"`
	}
	t := in.traders[e.Client]
	if t == nil || json.Unmarshal(e.Body, &body) != nil || !e.Decode(&ans) {
		r.Skipped = fmt.Sprintf("journal %d cannot be read back", e.Seq)
		return
	}
	nonce, _ := body["requestNonce"].(string)
	vol, _ := decimal.NewFromString(fmt.Sprint(body["volume"]))
	if vol.GreaterThan(decimal.New(5, -2)) {
		vol = vol.Sub(decimal.New(1, -2))
	} else {
		vol = vol.Add(decimal.New(1, -2))
	}
	body["volume"] = vol.String()
	delete(body, "sl") // stops judged against today's price would refuse it before the nonce
	delete(body, "tp")
	r.Account, r.Nonce, r.OrderID = t.account, nonce, ans.Order.ID
	h := in.holderOrNote(ctx, f)
	if h == nil {
		r.Skipped = "no holder"
		return
	}
	t0 := time.Now()
	got := in.j.call(ctx, h, t.token, t.name, "reusedNonce", http.MethodPost, "/api/fx/orders", body)
	r.Seq = got.Seq
	in.log.Printf("soak: reusedNonce %s of journal %d (order %d): %d %s", nonce, e.Seq, r.OrderID, got.Status, invariant.Truncate(string(got.Resp), 160))
	in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: nonce})
}
