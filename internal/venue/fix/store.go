package fix

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quickfixgo/quickfix"
)

// The session's message store (quickfix.MessageStore) keeps the sequence numbers and the
// messages not yet written in memory and persists them to the library's tables
// (fx_fix_sessions, fx_fix_messages) without a commit per message — the library's own SQL store
// commits every message the desk sends and every one it receives, one after another under the
// session's send lock, and that commit was most of a burst's own time. What a restart and a
// takeover need still holds:
//
//   - Outgoing sequence numbers are reserved in blocks. fx_fix_sessions.outgoing_seqnum is the
//     reservation: no number at or past it is handed out before it has been raised to that
//     number + reserveBlock by one durable UPDATE. A process that dies resumes at the
//     reservation, past every number it sent; the venue sees a gap and asks for a resend, and
//     the library answers the numbers this store holds no message for with a
//     SequenceReset-GapFill (its resend skips a missing message; a missing tail is answered by
//     a placeholder, see IterateMessages). A clean stop (Close) writes the exact next number.
//   - Message bodies, kept for resends, are written by one background writer in group commits
//     (whatever arrived in the last few ms, one transaction). A body a crash loses is gap-filled
//     when the venue asks for it. That is safe because the desk never relies on a resend to
//     execute an order: the order's journal row is written before it is sent, and the
//     reconciler resolves an order whose report never came with an OrderStatusRequest by
//     ClOrdID (docs/fix.md). Only orders are ever resent (Session.ToApp); queries are gap-filled.
//   - The incoming sequence number is persisted by the same writer, lazily, and never past a
//     report the desk has not journaled yet (hold: reports are journaled in batches after the
//     library counted them). A process that dies resumes lower, sees the venue's next number as
//     a gap and asks for a resend; the journal records a repeated execution report once (by
//     CumQty per ClOrdID).
//
// Reset, Refresh and the creation time behave as in the library's stores; a new holder reads
// the persisted state when the library creates its store.
type sessionStore struct {
	db     *sql.DB
	id     quickfix.SessionID
	where  []any // the session's key, in sessionKey's order
	block  int
	linger time.Duration
	log    *slog.Logger

	// writeMu serialises the writes of bodies and the incoming number (the writer, Reset) so
	// that none lands after a Reset. Taken before mu, never while holding it.
	writeMu sync.Mutex

	mu         sync.Mutex
	nextSender int
	nextTarget int
	reserved   int // fx_fix_sessions.outgoing_seqnum as persisted
	savedIn    int // fx_fix_sessions.incoming_seqnum as persisted
	created    time.Time
	pending    map[int][]byte // bodies not yet written, by sequence number
	// holds counts, by incoming sequence number, the messages handed on to be journaled and not
	// journaled yet (hold): the incoming number persisted never passes the lowest.
	holds  map[int]int
	closed bool

	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	batches, rows atomic.Int64 // group commits and bodies written, for tests
}

// reserveBlock is how many outgoing sequence numbers one durable write reserves.
const reserveBlock = 1000

// storeLinger is how long the writer waits after the first change before it commits, so that
// a burst's messages share a commit.
const storeLinger = 3 * time.Millisecond

// sessionKey is the WHERE clause naming one session in both tables.
const sessionKey = "`beginstring` = ? AND `sendercompid` = ? AND `sendersubid` = ? AND `senderlocid` = ? AND `targetcompid` = ? AND `targetsubid` = ? AND `targetlocid` = ? AND `session_qualifier` = ?"

// storeFactory creates the session's store (quickfix.MessageStoreFactory) and closes what it
// created when the session stops: the library never closes a store.
type storeFactory struct {
	db  *sql.DB
	log *slog.Logger
	// created, when set, is told each store created.
	created func(*sessionStore)

	mu     sync.Mutex
	stores []*sessionStore
}

func (f *storeFactory) Create(id quickfix.SessionID) (quickfix.MessageStore, error) {
	s, err := openStore(f.db, id, reserveBlock, storeLinger, f.log)
	if err != nil {
		return nil, fmt.Errorf("fix: open the session store: %w", err)
	}
	f.mu.Lock()
	f.stores = append(f.stores, s)
	f.mu.Unlock()
	if f.created != nil {
		f.created(s)
	}
	return s, nil
}

// closeAll flushes and closes every store created: the exact sequence numbers are written.
func (f *storeFactory) closeAll() error {
	f.mu.Lock()
	stores := f.stores
	f.stores = nil
	f.mu.Unlock()
	var errs []error
	for _, s := range stores {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// openStore reads the session's persisted state (creating its row at 1/1) and starts the writer.
func openStore(db *sql.DB, id quickfix.SessionID, block int, linger time.Duration, log *slog.Logger) (*sessionStore, error) {
	s := &sessionStore{db: db, id: id, block: block, linger: linger, log: log,
		where: []any{id.BeginString, id.SenderCompID, id.SenderSubID, id.SenderLocationID, id.TargetCompID, id.TargetSubID, id.TargetLocationID, id.Qualifier},
		holds: map[int]int{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	if err := s.load(); err != nil {
		return nil, err
	}
	go s.run()
	return s, nil
}

// load reads the persisted state into memory, creating the session's row when there is none.
func (s *sessionStore) load() error {
	var created time.Time
	var in, out int
	err := s.db.QueryRow("SELECT `creation_time`, `incoming_seqnum`, `outgoing_seqnum` FROM `fx_fix_sessions` WHERE "+sessionKey, s.where...).Scan(&created, &in, &out)
	if errors.Is(err, sql.ErrNoRows) {
		created, in, out = time.Now().UTC().Truncate(time.Second), 1, 1
		_, err = s.db.Exec("INSERT INTO `fx_fix_sessions` (`creation_time`, `incoming_seqnum`, `outgoing_seqnum`, `beginstring`, `sendercompid`, `sendersubid`, `senderlocid`, `targetcompid`, `targetsubid`, `targetlocid`, `session_qualifier`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			append([]any{created, in, out}, s.where...)...)
	}
	if err != nil {
		return fmt.Errorf("read session %s: %w", s.id, err)
	}
	s.created, s.nextTarget, s.savedIn, s.nextSender, s.reserved = created, in, in, out, out
	s.pending = map[int][]byte{}
	return nil
}

func (s *sessionStore) NextSenderMsgSeqNum() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextSender
}

func (s *sessionStore) NextTargetMsgSeqNum() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextTarget
}

func (s *sessionStore) IncrNextSenderMsgSeqNum() error { return s.handOut(0, nil) }

func (s *sessionStore) SaveMessageAndIncrNextSenderMsgSeqNum(seq int, msg []byte) error {
	if isLogon(msg) {
		// A Logon carries the password and is never resent (a resend gap-fills session
		// messages): its number is handed out, its body not kept.
		return s.handOut(0, nil)
	}
	return s.handOut(seq, msg)
}

// handOut advances the next outgoing number past the one being sent (and queues its body),
// raising the reservation first, durably, when the number reaches it: the library writes the
// message to the wire only after this returns.
func (s *sessionStore) handOut(seq int, msg []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("fix: the session store is closed")
	}
	if msg == nil {
		seq = s.nextSender
	}
	if seq >= s.reserved {
		to := seq + s.block
		// Never below what is stored: a process that read the session before another used it
		// must not move the other's reservation back.
		if _, err := s.db.Exec("UPDATE `fx_fix_sessions` SET `outgoing_seqnum` = GREATEST(`outgoing_seqnum`, ?) WHERE "+sessionKey, append([]any{to}, s.where...)...); err != nil {
			return fmt.Errorf("fix: reserve sequence numbers to %d: %w", to, err)
		}
		s.reserved = to
	}
	if msg != nil {
		s.pending[seq] = msg
		s.signal()
	}
	s.nextSender = seq + 1
	return nil
}

func (s *sessionStore) IncrNextTargetMsgSeqNum() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextTarget++
	s.signal()
	return nil
}

// hold keeps the persisted incoming number at or below seq, the number of a message received and
// not yet journaled, until release is called: a process that dies first is resent it.
func (s *sessionStore) hold(seq int) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[seq]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.holds[seq]--; s.holds[seq] <= 0 {
			delete(s.holds, seq)
		}
		s.signal()
	}
}

// incoming is the incoming number to persist: the next expected, or the lowest held; the caller
// holds mu.
func (s *sessionStore) incoming() int {
	in := s.nextTarget
	for seq := range s.holds {
		in = min(in, seq)
	}
	return in
}

func (s *sessionStore) SetNextSenderMsgSeqNum(next int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextSender = next // handOut reserves before a number past the reservation leaves
	return nil
}

func (s *sessionStore) SetNextTargetMsgSeqNum(next int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextTarget = next
	s.signal()
	return nil
}

func (s *sessionStore) CreationTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

// SetCreationTime changes the creation time in memory, as the library's memory store does; the
// persisted one is written by Reset.
func (s *sessionStore) SetCreationTime(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = t
}

func (s *sessionStore) SaveMessage(seq int, msg []byte) error {
	if isLogon(msg) {
		return nil // see SaveMessageAndIncrNextSenderMsgSeqNum
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[seq] = msg
	s.signal()
	return nil
}

func (s *sessionStore) GetMessages(begin, end int) ([][]byte, error) {
	var out [][]byte
	err := s.IterateMessages(begin, end, func(m []byte) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

// IterateMessages hands the stored messages from begin to end to cb in order, after writing
// what is pending. The library's resend gap-fills a missing message only when a later one
// follows; when the last number asked for (and sent) has no message, a Heartbeat placeholder
// stands for it, which the library skips like any session message and covers with the gap fill.
func (s *sessionStore) IterateMessages(begin, end int, cb func([]byte) error) error {
	if err := s.flush(); err != nil {
		s.log.Warn("FIX store: resend reads the database without the pending messages", slog.Any("err", err))
	}
	rows, err := s.db.Query("SELECT `msgseqnum`, `message` FROM `fx_fix_messages` WHERE "+sessionKey+" AND `msgseqnum` BETWEEN ? AND ? ORDER BY `msgseqnum`",
		append(append([]any{}, s.where...), begin, end)...)
	if err != nil {
		return fmt.Errorf("fix: read stored messages %d-%d: %w", begin, end, err)
	}
	msgs := map[int][]byte{}
	for rows.Next() {
		var seq int
		var m string
		if err := rows.Scan(&seq, &m); err != nil {
			rows.Close()
			return err
		}
		msgs[seq] = []byte(m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	for seq, m := range s.pending { // what a failed flush left behind
		if seq >= begin && seq <= end {
			msgs[seq] = m
		}
	}
	sent := s.nextSender - 1
	s.mu.Unlock()
	for seq, m := range msgs {
		if err := parseStored(m); err != nil {
			// The library would stop the resend at it (or panic): the venue gets a gap fill.
			s.log.Warn("FIX store: a stored message does not parse; gap-filled instead of resent", slog.Int("seq", seq), slog.Any("err", err))
			delete(msgs, seq)
		}
	}
	if _, ok := msgs[end]; !ok && end >= begin && end <= sent {
		msgs[end] = s.placeholder(end)
	}
	seqs := make([]int, 0, len(msgs))
	for seq := range msgs {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	for _, seq := range seqs {
		if err := cb(msgs[seq]); err != nil {
			return err
		}
	}
	return nil
}

// parseStored is whether the library can read stored message m, as an error. QuickFIX/Go
// v0.9.10 panics on some truncated messages (ParseMessage of "8=\x01" indexes past the end) and
// stops a whole resend at a message it cannot parse; the store's bytes are the database's, which
// anyone with access can change, so they are read here first, a panic turned into an error.
func parseStored(m []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("fix: the message does not parse: %v", r)
		}
	}()
	return quickfix.ParseMessage(quickfix.NewMessage(), bytes.NewBuffer(m))
}

// placeholder is a Heartbeat numbered seq, never sent: it only marks a number the store holds
// no message for.
func (s *sessionStore) placeholder(seq int) []byte {
	m := quickfix.NewMessage()
	m.Header.SetString(8, s.id.BeginString)
	m.Header.SetString(35, "0")
	m.Header.SetInt(34, seq)
	m.Header.SetString(49, s.id.SenderCompID)
	m.Header.SetString(56, s.id.TargetCompID)
	m.Header.SetString(52, time.Now().UTC().Format("20060102-15:04:05.000"))
	return []byte(m.String())
}

// Refresh writes what is pending and the exact sequence numbers, then reads them back as a new
// holder would.
func (s *sessionStore) Refresh() error {
	if err := s.persistExact(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

// Reset drops the session's messages and starts both sequence numbers at 1 with a new
// creation time, durably.
func (s *sessionStore) Reset() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Second)
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("fix: reset the session store: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("DELETE FROM `fx_fix_messages` WHERE "+sessionKey, s.where...); err != nil {
		return fmt.Errorf("fix: reset the session store: %w", err)
	}
	if _, err := tx.Exec("UPDATE `fx_fix_sessions` SET `creation_time` = ?, `incoming_seqnum` = 1, `outgoing_seqnum` = 1 WHERE "+sessionKey, append([]any{now}, s.where...)...); err != nil {
		return fmt.Errorf("fix: reset the session store: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fix: reset the session store: %w", err)
	}
	s.created, s.nextSender, s.nextTarget, s.reserved, s.savedIn = now, 1, 1, 1, 1
	s.pending = map[int][]byte{}
	return nil
}

// Close stops the writer, writes what is pending and the exact next sequence numbers (a clean
// stop leaves no gap), and refuses further sends.
func (s *sessionStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	return s.persistExact()
}

// persistExact writes the pending bodies and the incoming number, then the exact next outgoing
// number in place of this store's own reservation — only where the row still holds it: a row
// another process moved on since (a holder that used the session after this store was opened)
// keeps its number, which Refresh then reads (the library refreshes at every logon).
func (s *sessionStore) persistExact() error {
	if err := s.flush(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.db.Exec("UPDATE `fx_fix_sessions` SET `outgoing_seqnum` = ? WHERE "+sessionKey+" AND `outgoing_seqnum` = ?",
		append(append([]any{s.nextSender}, s.where...), s.reserved)...); err != nil {
		return fmt.Errorf("fix: write the next outgoing sequence number: %w", err)
	}
	s.reserved = s.nextSender
	return nil
}

// signal wakes the writer; the caller holds mu.
func (s *sessionStore) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run is the writer: after a change, it waits linger for more and commits them together. A
// failed commit is retried at the next change or second.
func (s *sessionStore) run() {
	defer close(s.stopped)
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-retry.C:
		}
		select {
		case <-s.stop:
			return
		case <-time.After(s.linger):
		}
		if err := s.flush(); err != nil {
			s.log.Warn("FIX store: could not write the session's messages; retrying", slog.Any("err", err))
		}
	}
}

// flush writes the pending bodies and the incoming number in one transaction.
func (s *sessionStore) flush() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	bodies, in := s.pending, s.incoming()
	inChanged := in != s.savedIn
	s.pending = map[int][]byte{}
	s.mu.Unlock()
	if len(bodies) == 0 && !inChanged {
		return nil
	}
	if err := s.write(bodies, in, inChanged); err != nil {
		s.mu.Lock()
		for seq, m := range bodies {
			if _, newer := s.pending[seq]; !newer {
				s.pending[seq] = m
			}
		}
		s.mu.Unlock()
		return err
	}
	s.mu.Lock()
	s.savedIn = in
	s.mu.Unlock()
	return nil
}

// insertMessagesSQL writes n messages in one statement.
func insertMessagesSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO `fx_fix_messages` (`beginstring`, `sendercompid`, `sendersubid`, `senderlocid`, `targetcompid`, `targetsubid`, `targetlocid`, `session_qualifier`, `msgseqnum`, `message`) VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE `message` = VALUES(`message`)")
	return b.String()
}

// writeChunk bounds one INSERT's rows (10 placeholders each).
const writeChunk = 500

func (s *sessionStore) write(bodies map[int][]byte, in int, inChanged bool) error {
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	seqs := make([]int, 0, len(bodies))
	for seq := range bodies {
		seqs = append(seqs, seq)
	}
	sort.Ints(seqs)
	for len(seqs) > 0 {
		chunk := seqs[:min(len(seqs), writeChunk)]
		seqs = seqs[len(chunk):]
		args := make([]any, 0, len(chunk)*10)
		for _, seq := range chunk {
			args = append(append(args, s.where...), seq, string(bodies[seq]))
		}
		if _, err := tx.ExecContext(ctx, insertMessagesSQL(len(chunk)), args...); err != nil {
			return fmt.Errorf("write %d messages: %w", len(chunk), err)
		}
	}
	if inChanged {
		if _, err := tx.ExecContext(ctx, "UPDATE `fx_fix_sessions` SET `incoming_seqnum` = ? WHERE "+sessionKey, append([]any{in}, s.where...)...); err != nil {
			return fmt.Errorf("write the incoming sequence number: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	s.batches.Add(1)
	s.rows.Add(int64(len(bodies)))
	return nil
}
