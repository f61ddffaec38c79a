package fix_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/alert"
	"fxdesk/internal/sim/fixvenue"
	"fxdesk/internal/testkit/poll"
	"fxdesk/internal/venue/fix"
)

// lockedBuffer is a log both the session's goroutines write and the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const (
	venueUser     = "fxdesk-taker"
	venuePassword = "pw-7c41e9d2b0"
)

// credentialVenue is a venue that requires venueUser/venuePassword on the Logon, and a session
// file for it carrying extra in its session's section.
func credentialVenue(t *testing.T) (v *fixvenue.Server, file func(extra string) string) {
	t.Helper()
	n := ids.Add(1)
	desk, ven := fmt.Sprintf("DESK%d%d", os.Getpid(), n), fmt.Sprintf("VENUE%d%d", os.Getpid(), n)
	v, err := fixvenue.New(fixvenue.Config{VenueCompID: ven, DeskCompID: desk, Prices: prices{"EURUSD": {"1.1000", "1.1002"}},
		Username: venueUser, Password: venuePassword}, testLog)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := v.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	host, port, _ := strings.Cut(addr, ":")
	return v, func(extra string) string {
		return fmt.Sprintf("[DEFAULT]\nConnectionType=initiator\nReconnectInterval=1\nHeartBtInt=30\n\n[SESSION]\nBeginString=FIX.4.4\nSenderCompID=%s\nTargetCompID=%s\nSocketConnectHost=%s\nSocketConnectPort=%s\n%s",
			desk, ven, host, port, extra)
	}
}

// runSession runs a session until stop or the test's end.
func runSession(t *testing.T, cfg fix.Config) (s *fix.Session, stop func()) {
	t.Helper()
	cfg.DB, cfg.Account, cfg.Timeout = testDB, "acct", 5*time.Second
	s, err := fix.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

// The session file's Username and Password go on the Logon (553/554), which a venue requiring
// them accepts; the password appears in no log line — the library's events at debug included —
// and in no message the session's store keeps.
func TestLogonCarriesTheSessionFilesCredentials(t *testing.T) {
	v, file := credentialVenue(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, _ := runSession(t, fix.Config{Settings: strings.NewReader(file("Username=" + venueUser + "\nPassword=" + venuePassword + "\n")), Log: log})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitLoggedOn(ctx); err != nil {
		t.Fatalf("%v; the venue refused %d logons", err, v.State().LogonsRefused)
	}
	if strings.Contains(logs.String(), venuePassword) {
		t.Fatalf("the password is in the session's log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "username="+venueUser) {
		t.Fatalf("the resolved session (username, password masked) is not logged:\n%s", logs.String())
	}
	var stored int
	if err := testDB.QueryRow("SELECT COUNT(*) FROM `fx_fix_messages` WHERE `sendercompid` = ? AND `message` LIKE ?", s.SessionID().SenderCompID, "%"+venuePassword+"%").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("the session's store keeps %d messages with the password", stored)
	}
}

// A Logon the venue refuses is logged at warn with the venue's words, logged on again after a
// pause that doubles instead of every ReconnectInterval, and raises venue-logon-refused after
// refusals in a row; a session that logs on resolves it.
func TestRefusedLogonIsLoggedBackedOffAndAlerted(t *testing.T) {
	v, file := credentialVenue(t)
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	inbox := alert.NewInbox(testDB, testLog)
	ctx := context.Background()
	_ = inbox.Resolve(ctx, fix.AlertLogonRefused) // another test's
	const backoff = 200 * time.Millisecond
	_, stop := runSession(t, fix.Config{Settings: strings.NewReader(file("Username=" + venueUser + "\nPassword=wrong\n")), Log: log, LogonBackoff: backoff, Alerts: inbox})

	// When each refusal happened, as the venue counts them.
	var at []time.Time
	poll.Until(t, 20*time.Second, 5*time.Millisecond, "five refused logons", func() bool {
		if n := v.State().LogonsRefused; n > len(at) {
			for range n - len(at) {
				at = append(at, time.Now())
			}
		}
		return len(at) >= 5
	})
	// The pause after the fourth refusal in a row is 8 × backoff; logging on every
	// ReconnectInterval (1 s) would come back sooner.
	if gap := at[4].Sub(at[3]); gap < 8*backoff-50*time.Millisecond {
		t.Fatalf("the fifth logon came %s after the fourth was refused; want a back-off of at least %s (refusals at %v)", gap, 8*backoff, at)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="the venue refused the FIX logon"`) || !strings.Contains(logs.String(), `text="invalid username or password"`) {
		t.Fatalf("the refusal is not logged at warn with the venue's text:\n%s", logs.String())
	}
	open, err := inbox.List(ctx, alert.Filter{Code: fix.AlertLogonRefused, Statuses: []alert.Status{alert.Open}})
	if err != nil || len(open) != 1 || !strings.Contains(open[0].Message, "invalid username or password") {
		t.Fatalf("alert %s: %+v %v; want one open, with the venue's text", fix.AlertLogonRefused, open, err)
	}

	// The session file corrected, the next holder logs on and the alert is resolved.
	stop()
	s, _ := runSession(t, fix.Config{Settings: strings.NewReader(file("Username=" + venueUser + "\nPassword=" + venuePassword + "\n")), Log: testLog, Alerts: inbox})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.WaitLoggedOn(wctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, 20*time.Millisecond, "the alert resolved once logged on", func() bool {
		open, err := inbox.List(ctx, alert.Filter{Code: fix.AlertLogonRefused, Statuses: []alert.Status{alert.Open}})
		return err == nil && len(open) == 0
	})
}
