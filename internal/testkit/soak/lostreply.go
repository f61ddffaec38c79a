package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fxdesk/internal/testkit/soak/invariant"
	"fxdesk/internal/testkit/tcpproxy"
)

// The lost journal reply (FIX lane; docs/soak.md, «The FIX lane»): the FIX journal records a
// venue execution in one transaction (an INSERT INTO fx_fix_execution, then COMMIT). The fault
// lets the next such COMMIT reach MySQL, which carries it out, and drops what MySQL answers at
// the proxy for LoseFor, then cuts that one connection: the desk's journal holds the execution
// and the desk was told the commit failed. The venue resends nothing (the session's sequence
// went on), so whatever the desk does next it does knowing only what its journal says.

// faultLostJournalReply is the fault's kind, as the schedule and the summary name it.
const faultLostJournalReply = invariant.FaultLostJournalReply

// lostReplyWait bounds how long an armed fault waits for a journal commit: the holder journals
// only while trades reach the venue, and a fault lane must not stall on a quiet desk.
const lostReplyWait = 15 * time.Second

// lostReplySchedule draws the lost journal replies of a FIX soak of d from seed, from a
// generator of their own (so every other lane's schedule is what it was): from 14 s in, 8–14 s
// apart, each reply lost for 0.2–1.5 s before the cut.
func lostReplySchedule(seed uint64, d time.Duration) []fault {
	rng := rand.New(rand.NewPCG(seed, seed^0x105710a5))
	return drawLane(rng, []string{faultLostJournalReply}, 14*time.Second, 8000*time.Millisecond, 6000, d, func(f *fault) {
		f.LoseFor = time.Duration(200+rng.IntN(1300)) * time.Millisecond
	})
}

// replyLoser watches what the desk sends MySQL through the soak's proxy and, while armed, loses
// the reply to the first COMMIT of a transaction that journaled a venue execution. It reads each
// chunk a client sends as one packet: the desk's driver writes a statement in one write and
// waits for its answer, so a COMMIT or an INSERT is a chunk of its own on loopback (one it
// misses only makes the fault take the next).
type replyLoser struct {
	p     *tcpproxy.Proxy
	armed atomic.Bool

	mu         sync.Mutex
	loseFor    time.Duration
	fired      chan int     // the connection whose reply was lost
	journaling map[int]bool // connections whose open transaction journaled an execution
}

func newReplyLoser(p *tcpproxy.Proxy) *replyLoser {
	l := &replyLoser{p: p, journaling: map[int]bool{}}
	p.Tap(tcpproxy.MySQLConnQueries(l.query))
	return l
}

// query watches each statement the desk sends MySQL (tcpproxy.MySQLConnQueries reads them out of
// the packets).
func (l *replyLoser) query(conn int, q string) {
	if !l.armed.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case journalsExecution(q):
		l.journaling[conn] = true
	case q == "START TRANSACTION" || q == "ROLLBACK":
		delete(l.journaling, conn)
	case q == "COMMIT" && l.journaling[conn] && l.fired != nil:
		delete(l.journaling, conn)
		l.p.LoseReplies(conn, l.loseFor)
		l.fired <- conn
		l.fired = nil
		l.armed.Store(false)
	case q == "COMMIT":
		delete(l.journaling, conn)
	}
}

// lose arms the loser for the next journal commit and waits (at most wait) until it took one:
// the connection it lost the reply on, or false when no commit came.
func (l *replyLoser) lose(ctx context.Context, loseFor, wait time.Duration) (int, bool) {
	return l.await(ctx, l.arm(loseFor), wait)
}

// arm makes the next journal commit lose its reply; the commit's connection is sent on the
// channel it answers.
func (l *replyLoser) arm(loseFor time.Duration) chan int {
	fired := make(chan int, 1)
	l.mu.Lock()
	l.loseFor, l.fired = loseFor, fired
	clear(l.journaling) // a transaction begun before the arming is not watched from its middle
	l.mu.Unlock()
	l.armed.Store(true)
	return fired
}

// await waits (at most wait) for an armed loser to fire, and disarms it if it did not.
func (l *replyLoser) await(ctx context.Context, fired chan int, wait time.Duration) (int, bool) {
	select {
	case conn := <-fired:
		return conn, true
	case <-ctx.Done():
	case <-time.After(wait):
	}
	l.armed.Store(false)
	l.mu.Lock()
	l.fired = nil
	l.mu.Unlock()
	select { // it may have fired while disarming
	case conn := <-fired:
		return conn, true
	default:
		return 0, false
	}
}

// injectLostReply plays one lost journal reply and notes its window: from the lost COMMIT to
// the cut.
func (in *injector) injectLostReply(ctx context.Context, f fault) {
	in.loserOnce.Do(func() { in.loser = newReplyLoser(in.c.mysqlP) })
	conn, ok := in.loser.lose(ctx, f.LoseFor, lostReplyWait)
	if !ok {
		in.log.Printf("soak: %s: no venue execution journaled within %s; nothing lost", f.Kind, lostReplyWait)
		return
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(f.LoseFor):
	}
	note := fmt.Sprintf("MySQL connection %d: a COMMIT journaling a venue execution carried out, its reply dropped %s, then the connection cut", conn, f.LoseFor)
	in.log.Printf("soak: %s: %s", f.Kind, note)
	in.note(invariant.Window{Kind: f.Kind, Start: t0, End: time.Now(), Note: note})
}

// journalsExecution is whether statement q inserts into the FIX journal's executions (matched
// on its words, not as one literal statement the SQL portability test would take for SQL).
func journalsExecution(q string) bool {
	f := strings.Fields(q)
	return len(f) >= 3 && strings.EqualFold(f[0], "insert") && strings.EqualFold(f[1], "into") && f[2] == "`fx_fix_execution`"
}
