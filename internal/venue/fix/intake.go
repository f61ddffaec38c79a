package fix

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// intake takes in what the venue sends the desk's application — execution reports and the
// answers to position requests — from the library's receive loop (FromApp), and journals the
// reports in batches on a goroutine of its own: everything queued while the last batch was at
// the database, in one transaction (docs/fix.md, «The burst on one session»). Then, in the order
// the messages came, it updates the holder's trades, answers whoever waits for each report and
// hands on each position answer — so a position answer is read only after every report before
// it is journaled, as when the receive loop journaled them one at a time.
//
// A report is counted as received by the library before it is journaled, so the session's store
// does not persist the incoming sequence number past a report still queued here
// (sessionStore.hold): a process that dies with reports queued is resent them at its
// successor's logon, and the journal records each once (by CumQty per ClOrdID).
type intake struct {
	s *Session

	mu       sync.Mutex
	cond     *sync.Cond
	queue    []inbound
	running  bool
	handling bool // a batch is being journaled
	stopping bool
	stopped  chan struct{}
}

// inbound is one message from the venue, read.
type inbound struct {
	report *report // an execution report
	then   func()  // else what to do with it once every report before it is journaled
	// release lets the store persist the incoming sequence number past this message.
	release func()
}

// maxReports caps the reports one transaction journals.
const maxReports = 500

func newIntake(s *Session) *intake {
	in := &intake{s: s}
	in.cond = sync.NewCond(&in.mu)
	return in
}

// start runs the journaling goroutine until stop.
func (in *intake) start() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.running {
		return
	}
	in.running, in.stopping, in.stopped = true, false, make(chan struct{})
	go in.run(in.stopped)
}

// stop journals what is queued and ends the goroutine; messages added later are handled on the
// caller's goroutine.
func (in *intake) stop() {
	in.mu.Lock()
	if !in.running {
		in.mu.Unlock()
		return
	}
	in.stopping = true
	stopped := in.stopped
	in.cond.Broadcast()
	in.mu.Unlock()
	<-stopped
}

// add queues m; with no goroutine running, m is handled at once.
func (in *intake) add(m inbound) {
	in.mu.Lock()
	if !in.running {
		in.mu.Unlock()
		in.s.handle([]inbound{m})
		return
	}
	in.queue = append(in.queue, m)
	in.cond.Broadcast()
	in.mu.Unlock()
}

func (in *intake) run(stopped chan struct{}) {
	defer close(stopped)
	in.mu.Lock()
	for {
		for len(in.queue) == 0 && !in.stopping {
			in.cond.Wait()
		}
		if len(in.queue) == 0 {
			in.running = false
			in.mu.Unlock()
			return
		}
		// Up to maxReports reports, and whatever else came among them.
		n, reports := 0, 0
		for n < len(in.queue) && reports < maxReports {
			if in.queue[n].report != nil {
				reports++
			}
			n++
		}
		batch := slices.Clone(in.queue[:n])
		in.queue = append(in.queue[:0], in.queue[n:]...)
		in.handling = true
		in.mu.Unlock()
		in.s.handle(batch)
		in.mu.Lock()
		in.handling = false
		in.cond.Broadcast()
	}
}

// drain waits until everything added so far is handled.
func (in *intake) drain() {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.running && (len(in.queue) > 0 || in.handling) {
		in.cond.Wait()
	}
}

// handle journals the reports of batch together, then, in order, updates the holder's trades,
// answers the waiters and runs the rest.
func (s *Session) handle(batch []inbound) {
	ctx := context.Background()
	s.relearning.Lock()
	var reports []report
	for _, m := range batch {
		if m.report != nil && journaled(*m.report) {
			reports = append(reports, *m.report)
		}
	}
	results := s.journalReports(ctx, reports)
	var unknown, resent []string
	i := 0
	for _, m := range batch {
		if m.report == nil || !journaled(*m.report) {
			continue
		}
		if results[i].err == nil {
			// From here on the report is its order's as the journal keys it: the venue's own
			// order under a key of the desk's making, so that it answers no desk order's waiter
			// (journal.go, «Whose execution»).
			m.report.ClOrdID = results[i].applied.key
			unknown = append(unknown, s.trades.applied(*m.report, results[i].applied)...)
			if resentFill(*m.report, results[i].applied) {
				resent = append(resent, m.report.ClOrdID)
			}
		}
		i++
	}
	// Trades the holder did not keep (closed when it loaded them), and those of executions the
	// journal held before their report came: read as the journal has them now.
	s.relearn(ctx, unknown, resent)
	s.relearning.Unlock()
	i = 0
	for _, m := range batch {
		failed := false
		switch {
		case m.report == nil:
			m.then()
		case journaled(*m.report):
			s.answerReport(*m.report, results[i])
			failed = results[i].err != nil
			i++
		default:
			s.answerReport(*m.report, reportResult{})
		}
		switch {
		case failed:
			// Not recorded: its hold stays, so the store persists no incoming number past it,
			// and the session reconnects to have it resent. A report of the venue's own order
			// (a venue-side close) has no other way back: the desk cannot ask about a ClOrdID
			// it never knew.
			s.askResend()
		case m.release != nil:
			m.release()
		}
	}
}

// journaled is whether the journal records r: not an "unknown order" answer (the answer to a
// status request, not a state of any order), nor the empty report a mass status with no orders
// answers with.
// Nor a duplicate-order refusal: the order it names is the earlier send (api.go, duplicateOrder).
func journaled(r report) bool { return !unknownOrder(r) && !duplicateOrder(r) && r.ClOrdID != "NONE" }

// reportResult is what journaling one report did.
type reportResult struct {
	applied applied
	err     error
}

// journalReports records reports in one transaction; if it fails, each in one of its own, so that
// a report the journal refuses does not take the others with it.
func (s *Session) journalReports(ctx context.Context, reports []report) []reportResult {
	out := make([]reportResult, len(reports))
	if len(reports) > 1 {
		err := s.journalTogether(ctx, reports, out)
		if err == nil {
			return out
		}
		s.log.Warn("FIX: a batch of reports was refused by the journal; recording them one by one", slog.Int("reports", len(reports)), slog.Any("err", err))
	}
	for i, r := range reports {
		out[i].applied, out[i].err = s.journal.apply(ctx, r)
	}
	return out
}

// journalTogether records reports in one transaction, their results into out.
func (s *Session) journalTogether(ctx context.Context, reports []report, out []reportResult) error {
	tx, err := s.journal.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("journal %d reports: %w", len(reports), err)
	}
	defer func() { _ = tx.Rollback() }()
	for i, r := range reports {
		if out[i].applied, err = applyTx(ctx, tx, r); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("journal %d reports: %w", len(reports), err)
	}
	return nil
}

// answerReport hands a report, journaled or not, to whoever waits for its ClOrdID and its mass
// status request.
func (s *Session) answerReport(r report, res reportResult) {
	if unknownOrder(r) || duplicateOrder(r) {
		// "Unknown order": the answer to a status request, not a state of any order; "duplicate
		// order": the refusal of a send, not the state of the order sent before.
		s.deliver(r.ClOrdID, answer{r: r})
		return
	}
	if r.ClOrdID == "NONE" { // a mass status with no orders answers with one empty report
		if r.MassStatusReqID != "" {
			s.countMass(r.MassStatusReqID, false, r.LastRptRequested, nil)
		}
		return
	}
	if res.err != nil {
		s.log.Error("could not record the venue's report; the session reconnects and the venue resends it", slog.String("clOrdId", r.ClOrdID), slog.Any("err", res.err))
	}
	a := answer{r: r, execID: res.applied.execID, err: res.err}
	s.deliver(r.ClOrdID, a)
	if r.MassStatusReqID != "" {
		s.countMass(r.MassStatusReqID, true, r.LastRptRequested, res.err)
	}
}
