package fix

import (
	"database/sql"
	"log/slog"
	"time"

	"github.com/quickfixgo/quickfix"
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

// Logons counts the connections the session opened.
func (s *Session) Logons() int64 { return s.logons.Load() }
