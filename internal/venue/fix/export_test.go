package fix

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/shopspring/decimal"
)

// TestStore is the session's store with what its tests need beyond quickfix.MessageStore.
type TestStore = sessionStore

// OpenTestStore opens the store of session id with its own reservation block and batching time.
func OpenTestStore(db *sql.DB, id quickfix.SessionID, block int, linger time.Duration) (*TestStore, error) {
	return openStore(db, id, block, linger, slog.New(slog.DiscardHandler))
}

// Crash stops the writer without writing anything: what a killed process leaves in the database.
func (s *sessionStore) Crash() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
}

// Flush writes what is pending now.
func (s *sessionStore) Flush() error { return s.flush() }

// Commits is how many group commits the writer made and how many messages they wrote.
func (s *sessionStore) Commits() (batches, rows int64) { return s.batches.Load(), s.rows.Load() }

// TestReport is an execution report as the desk reads it.
type TestReport = report

// LiveTrade is a trade as the holder keeps it in memory.
type LiveTrade struct {
	Key, Symbol, Pending string
	ID                   int64
	Units                decimal.Decimal
	Closes               int
}

// LiveTrades is the holder's trades in memory, by key.
func (s *Session) LiveTrades() map[string]LiveTrade {
	out := map[string]LiveTrade{}
	for k, t := range s.trades.snapshot() {
		out[k] = LiveTrade{Key: t.key, Symbol: t.symbol, Pending: t.pending, ID: t.id, Units: t.units, Closes: t.closes}
	}
	return out
}

// HoldIdentities keeps identity batches from being taken until n orders are queued (0: never).
func (s *Session) HoldIdentities(n int) { s.identities.HoldUntil(n) }

// QueuedIdentities is how many orders wait for their identity batch.
func (s *Session) QueuedIdentities() int {
	s.identities.mu.Lock()
	defer s.identities.mu.Unlock()
	return len(s.identities.queue)
}

// IdentityBatches is how many identity statements carried more than one order.
func (s *Session) IdentityBatches() int64 { return s.identities.batches.Load() }

// JournalBatch hands reports to the intake's handling as one batch, as if they had come together
// (s.handle: one transaction, then the holder's trades and the waiters).
func (s *Session) JournalBatch(rs ...TestReport) {
	batch := make([]inbound, len(rs))
	for i := range rs {
		batch[i] = inbound{report: &rs[i]}
	}
	s.handle(batch)
}

// Logons counts the connections the session opened.
func (s *Session) Logons() int64 { return s.logons.Load() }

// JournalElsewhere records report r in the journal as another process would (an old holder that
// heard it after this one loaded its trades): the journal holds it, this session's memory does not.
func (s *Session) JournalElsewhere(r TestReport) error {
	_, err := s.journal.apply(context.Background(), r)
	return err
}
