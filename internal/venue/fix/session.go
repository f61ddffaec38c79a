package fix

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/quickfix/config"

	"fxdesk/internal/venue"
)

// Tables of the session's store (store.go; migrations/000020_fix_session.up.sql).
const (
	sessionsTable = "fx_fix_sessions"
	messagesTable = "fx_fix_messages"
)

// Config builds a Session.
type Config struct {
	// Settings is the session file (QuickFIX settings: one FIX.4.4 initiator session with
	// SocketConnectHost/Port, SenderCompID, TargetCompID, HeartBtInt; Username and Password when
	// the venue requires them on the Logon). The desk's own message
	// store keeps the session in its database; a file that names a store of its own is refused.
	Settings io.Reader
	// DB is the desk's database: the session's store and the journal.
	DB *sql.DB
	// Account names the venue account (the reconciler's cursor key; Account (1) on position
	// requests).
	Account string
	// Timeout bounds a send's wait for its report and a query's wait for its answers.
	Timeout time.Duration
	// OnWrote, when set, is told each order's own time: from its trigger to the message handed
	// to the session's writer.
	OnWrote func(time.Duration)
	// LogonBackoff is the pause after a refused logon, doubled on each refusal in a row up to a
	// minute (logon.go); default 1s.
	LogonBackoff time.Duration
	// Alerts, when set, is told of refused logons (AlertLogonRefused) and of queries the venue
	// refuses (AlertQueryRefused).
	Alerts Alerts
	// FreshVenue says the venue started with this process (the bundled venue in-process, whose
	// store is in memory): the session's stored sequence numbers and messages are dropped before
	// the first logon, which a venue that kept its side of the session would refuse.
	FreshVenue bool
	Log        *slog.Logger
}

// Session is the desk's FIX session and its adapter. Run logs on and keeps the session until
// its context ends; the API methods work while it runs (sends fail with ErrNotSent otherwise).
type Session struct {
	cfg       Config
	settings  *quickfix.Settings
	sessionID quickfix.SessionID
	journal   *journal
	log       *slog.Logger

	// trades is the holder's trades in memory while Run runs; identities commits orders'
	// identity rows together; intake journals the venue's reports in batches (docs/fix.md, «The
	// burst on one session»).
	trades     *liveTrades
	identities *identities
	intake     *intake
	// sent is the NewOrderSingles in flight by MsgSeqNum, for a Reject that names one (refusal.go).
	sent *sentOrders
	// relearning is held while trades are read again from the journal into memory, and by the
	// intake while it journals a batch and applies it: a read of the journal is never set over a
	// report applied after it.
	relearning sync.Mutex
	// store is the session's store the library created last (its incoming number is held back
	// while reports wait in the intake).
	store atomic.Pointer[sessionStore]

	mu       sync.Mutex
	loggedOn bool
	running  bool
	// refusalRaised is whether AlertQueryRefused may be open: set at start, so that the first
	// answer resolves one an earlier holder raised.
	refusalRaised atomic.Bool
	// waiters are the sends and queries waiting for the venue, by ClOrdID or request id.
	waiters map[string][]*mailbox
	// positions collects the answers to a position request, by PosReqID; mass counts the
	// reports answering a mass status request, by MassStatusReqID.
	positions map[string]*positionAnswer
	mass      map[string]*massCount

	// burst summarises a burst of orders in one "venue burst" line once none is in flight;
	// logons counts the connections the session opened (a burst should open none).
	burst    venue.Burst
	inFlight atomic.Int64
	logons   atomic.Int64
	// username and password are the session file's logon credentials (logon.go); refusal
	// counts the venue's refusals of the Logon in a row (under mu), refused tells Run of one.
	username, password string
	refusal            logonRefusal
	refused            chan struct{}
	// resend asks Run to reconnect so that the venue resends a report the journal could not
	// record (intake.go).
	resend chan struct{}
	// afterReservedAsk, set by tests only, runs between the venue's answer about a reserved close
	// and what resolveReserved does with it: the moment a close of the trade may claim it.
	afterReservedAsk func(clOrdID string)
}

// New reads the session file and checks it; it does not connect.
func New(cfg Config) (*Session, error) {
	switch {
	case cfg.Settings == nil:
		return nil, errors.New("fix: a session file is required")
	case cfg.DB == nil:
		return nil, errors.New("fix: the desk's database is required")
	case cfg.Account == "":
		return nil, errors.New("fix: the venue account is required")
	case cfg.Timeout <= 0:
		return nil, fmt.Errorf("fix: Timeout must be positive, got %s", cfg.Timeout)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.LogonBackoff == 0 {
		cfg.LogonBackoff = defaultLogonBackoff
	}
	if cfg.LogonBackoff < 0 {
		return nil, fmt.Errorf("fix: LogonBackoff must not be negative, got %s", cfg.LogonBackoff)
	}
	settings, err := quickfix.ParseSettings(cfg.Settings)
	if err != nil {
		return nil, fmt.Errorf("fix: read the session file: %w", err)
	}
	sessions := settings.SessionSettings()
	if len(sessions) != 1 {
		return nil, fmt.Errorf("fix: the session file must define exactly one [SESSION], it defines %d", len(sessions))
	}
	var id quickfix.SessionID
	var username, password string
	for sid, ss := range sessions {
		id = sid
		username, _ = ss.Setting(settingUsername)
		password, _ = ss.Setting(settingPassword)
		if password != "" && username == "" {
			return nil, errors.New("fix: the session file sets Password without Username; the Logon carries both (553, 554)")
		}
		if sid.BeginString != quickfix.BeginStringFIX44 {
			return nil, fmt.Errorf("fix: BeginString must be %s, the session file says %s", quickfix.BeginStringFIX44, sid.BeginString)
		}
		if ct, _ := ss.Setting(config.SocketConnectHost); ct == "" {
			return nil, errors.New("fix: the session file must set SocketConnectHost and SocketConnectPort (the desk is the initiator)")
		}
		for _, k := range []string{config.SQLStoreDriver, config.SQLStoreDataSourceName} {
			if ss.HasSetting(k) {
				return nil, fmt.Errorf("fix: the session file must not set %s: the desk stores the session in its own database", k)
			}
		}
		for _, k := range []string{config.ResetOnLogon, config.ResetOnDisconnect, config.ResetOnLogout} {
			if v, _ := ss.Setting(k); v == "Y" {
				return nil, fmt.Errorf("fix: %s=Y would reset the sequence numbers a takeover must resume; remove it", k)
			}
		}
		if v, _ := ss.Setting(config.RefreshOnLogon); v == "N" {
			return nil, fmt.Errorf("fix: %s=N would log on with the sequence numbers read at start, stale once another process used the session since; remove it", config.RefreshOnLogon)
		}
		// SessionSettings are copies over the [DEFAULT] section: what the desk adds goes there.
		g := settings.GlobalSettings()
		// Every logon reads the sequence numbers from the store again: a holder that started
		// while an older one still used the session (a stopped holder let go late) logs on with
		// theirs, not with what it read at start.
		g.Set(config.RefreshOnLogon, "Y")
		if !ss.HasSetting(config.ReconnectInterval) {
			g.Set(config.ReconnectInterval, "1")
		}
		if !ss.HasSetting(config.HeartBtInt) {
			g.Set(config.HeartBtInt, "30")
		}
		// No StartTime/EndTime unless the file sets them: the lease decides when the session is
		// up, not a schedule. A daily one ("00:00:00" to "00:00:00") would make the library reset
		// both sequence numbers to 1 once the store's creation time is from an earlier day — at
		// midnight, or at a takeover the next day (QuickFIX/Go v0.9.10, CheckSessionTime) — and
		// have it check the schedule on every turn of its send loop.
	}
	if cfg.FreshVenue {
		for _, table := range []string{sessionsTable, messagesTable} {
			if _, err := cfg.DB.Exec("DELETE FROM `"+table+"` WHERE `beginstring` = ? AND `sendercompid` = ? AND `targetcompid` = ?",
				id.BeginString, id.SenderCompID, id.TargetCompID); err != nil {
				return nil, fmt.Errorf("fix: reset the session for a new venue: %w", err)
			}
		}
	}
	j := &journal{db: cfg.DB}
	s := &Session{cfg: cfg, settings: settings, sessionID: id, journal: j, log: cfg.Log, trades: newLiveTrades(), identities: newIdentities(j),
		waiters: map[string][]*mailbox{}, positions: map[string]*positionAnswer{}, mass: map[string]*massCount{}, resend: make(chan struct{}, 1), sent: newSentOrders(),
		username: username, password: password, refused: make(chan struct{}, 1)}
	s.intake = newIntake(s)
	s.refusalRaised.Store(true)
	return s, nil
}

// SessionID names the session (the desk's SenderCompID first).
func (s *Session) SessionID() quickfix.SessionID { return s.sessionID }

// Run loads the holder's trades from the journal, starts the initiator — it logs on with the
// sequence numbers stored in MySQL — and keeps the session until ctx ends, then logs out. Only
// the lease holder calls it, for as long as it holds the lease: while it runs, this process is
// the only writer of the journal, so the trades it keeps in memory stay the journal's. The
// library reconnects on its own (ReconnectInterval) after a drop.
func (s *Session) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("fix: the session is already running")
	}
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()
	if !s.loadLiveRetrying(ctx) {
		return nil
	}
	defer s.trades.unload()
	s.intake.start()
	defer s.intake.stop()
	for restart := false; ; restart = true {
		stores := &storeFactory{db: s.cfg.DB, log: s.log, created: s.store.Store}
		init, err := quickfix.NewInitiator(s, stores, s.settings, logFactory{s.log, s.incoming})
		if err == nil {
			if err = init.Start(); err != nil {
				init.Stop()
			}
		}
		if err != nil {
			_ = stores.closeAll()
		}
		if err != nil && !restart {
			return fmt.Errorf("fix: start the initiator: %w", err)
		}
		if err != nil {
			// A restart meets what made the session stuck (the store unreachable): again later.
			s.log.WarnContext(ctx, "FIX session: restarting the initiator failed; trying again", slog.Any("err", err))
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		s.log.InfoContext(ctx, "FIX session started; logging on", slog.String("session", s.sessionID.String()),
			slog.String("username", s.username), slog.Bool("password", s.password != "")) // never the password itself
		why := s.untilRestart(ctx)
		init.Stop()
		// The reports received are journaled before the store writes its last incoming number.
		s.intake.drain()
		if err := stores.closeAll(); err != nil {
			// The reservation stays: the next holder resumes past it, a gap the venue has filled.
			s.log.Warn("FIX session store: the exact sequence numbers were not written", slog.Any("err", err))
		}
		switch why {
		case restartStuck:
			s.log.WarnContext(ctx, "FIX session not logged on for a while; restarting the initiator", slog.Duration("after", stuckAfter))
			continue
		case restartRefused:
			if s.afterRefusal(ctx) {
				continue
			}
		case restartResend:
			s.log.WarnContext(ctx, "FIX session: reconnecting so that the venue resends a report the journal could not record")
			select { // not faster than the journal may come back
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			if ctx.Err() == nil {
				continue
			}
		}
		break
	}
	s.mu.Lock()
	s.loggedOn = false
	s.mu.Unlock()
	s.log.Info("FIX session stopped", slog.String("session", s.sessionID.String()))
	return nil
}

// loadLiveRetrying loads the holder's trades from the journal (loadLive), trying again every second while the
// database refuses; false when ctx ended first.
func (s *Session) loadLiveRetrying(ctx context.Context) bool {
	for {
		err := s.loadLive(ctx)
		if err == nil {
			return true
		}
		s.log.WarnContext(ctx, "FIX session: could not load the trades from the journal; trying again before logging on", slog.Any("err", err))
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// stuckAfter is how long the session may stay logged out before Run restarts the initiator.
// QuickFIX/Go v0.9.10 leaves a connection on which it could not write its Logon (its store, the
// desk's MySQL, unreachable for a moment) open with no logon timeout and never retries on it; a
// new initiator connects and logs on afresh. A venue that is down only sees a reconnect.
const stuckAfter = 10 * time.Second

// Why Run restarts the initiator (untilRestart).
const (
	restartNone    = iota // ctx ended: stop
	restartStuck          // not logged on for stuckAfter
	restartResend         // a report could not be journaled (intake.go): the new logon asks for it again
	restartRefused        // the venue refused the logon (logon.go): again after a pause
)

// untilRestart waits until ctx ends or the initiator must be restarted, and says which.
func (s *Session) untilRestart(ctx context.Context) int {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	since := time.Now()
	up := false
	for {
		select {
		case <-ctx.Done():
			return restartNone
		case <-s.resend:
			return restartResend
		case <-s.refused:
			return restartRefused
		case now := <-t.C:
			if !s.Reachable() {
				up = false
				if now.Sub(since) >= stuckAfter {
					return restartStuck
				}
				continue
			}
			if !up {
				s.resolveRefusal(ctx) // logged on: whatever refused it before is over
			}
			up, since = true, now
		}
	}
}

// askResend makes Run reconnect: the store has kept the incoming number at a report the journal
// could not record, and the next logon asks the venue to resend from it.
func (s *Session) askResend() {
	select {
	case s.resend <- struct{}{}:
	default:
	}
}

// RunWhile runs the session (Run) until ctx ends or holding answers false — asked every check —
// and answers whether it stopped because the lease was lost. The lease holder calls it with its
// keeper's Serving: a process that lost the lease logs out at once, so two desks never share the
// session.
func (s *Session) RunWhile(ctx context.Context, holding func() bool, check time.Duration) (lost bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lostFlag atomic.Bool
	go func() {
		t := time.NewTicker(check)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if !holding() {
					lostFlag.Store(true)
					s.log.Error("lease lost: logging the FIX session out; this process no longer trades")
					cancel()
					return
				}
			}
		}
	}()
	err = s.Run(ctx)
	return lostFlag.Load(), err
}

// Reachable is whether the session is logged on now.
func (s *Session) Reachable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loggedOn
}

// AccountID is the venue account.
func (s *Session) AccountID() string { return s.cfg.Account }

// WaitLoggedOn waits until the session is logged on or ctx ends.
func (s *Session) WaitLoggedOn(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !s.Reachable() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("fix: wait for logon: %w", ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// logFactory sends the library's session events to slog; messages are not logged (a burst would
// flood the log, and a Logon carries the password). incoming reads each message as it comes in
// (Session.incoming: the venue's refusal of the Logon).
type logFactory struct {
	log      *slog.Logger
	incoming func([]byte)
}

func (f logFactory) Create() (quickfix.Log, error) { return fixLog{log: f.log}, nil }
func (f logFactory) CreateSessionLog(id quickfix.SessionID) (quickfix.Log, error) {
	return fixLog{f.log.With(slog.String("session", id.String())), f.incoming}, nil
}

type fixLog struct {
	log      *slog.Logger
	incoming func([]byte)
}

func (l fixLog) OnIncoming(raw []byte) {
	if l.incoming != nil {
		l.incoming(raw)
	}
}

// OnOutgoing is called on the session's goroutine right after it handed a message to the
// connection's writer. QuickFIX/Go v0.9.10 hands its send queue over with a non-blocking channel
// send and, while the writer is busy, tries again in a tight loop (quickfixgo/quickfix#615): with
// a burst queued at once and one Go thread (GOMAXPROCS=1, as docs/operations.md advises next to
// MariaDB), that loop holds the thread for a whole scheduler time slice per message, and a burst of
// 360 closes took seconds to reach the wire. Yielding here lets the writer write each message at
// once (docs/fix.md, «The burst on one session»).
func (l fixLog) OnOutgoing([]byte)           { runtime.Gosched() }
func (l fixLog) OnEvent(s string)            { l.log.Debug("FIX session", slog.String("event", s)) }
func (l fixLog) OnEventf(f string, a ...any) { l.OnEvent(fmt.Sprintf(f, a...)) }
