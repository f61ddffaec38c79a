package fix

import (
	"bytes"
	"context"
	"log/slog"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"

	"fxdesk/internal/alert"
)

// Logon credentials and refusals (docs/fix.md, «Logon»). Most LPs require Username (553) and
// Password (554) on the Logon; the session file's section names them (settings Username and
// Password), and the desk sends them on every Logon. The password never reaches a log or the
// session's store: the library logs no message (logFactory), and the store keeps no Logon body
// (a Logon is never resent; sessionStore.SaveMessageAndIncrNextSenderMsgSeqNum).
//
// An LP that refuses the Logon answers it with a Logout whose Text says why ("invalid password",
// "MsgSeqNum too low, expecting 19 but received 4"). The library reads that Logout while it waits
// for the answer to its Logon and reports it only as a debug event; the desk reads it as it comes
// in (fixLog.OnIncoming), logs it at warn with its text, and backs off — LogonBackoff, doubled on
// each refusal in a row up to maxLogonBackoff — instead of logging on again every
// ReconnectInterval. After logonRefusedAlertAfter refusals in a row it raises AlertLogonRefused;
// the next logon resolves it.

// Settings of the session's section the desk reads itself (the library ignores them).
const (
	settingUsername = "Username"
	settingPassword = "Password"
)

// AlertLogonRefused is raised when the venue refused the session's Logon
// logonRefusedAlertAfter times in a row.
const AlertLogonRefused = "venue-logon-refused"

const (
	// logonRefusedAlertAfter is how many refusals in a row raise AlertLogonRefused: one may be a
	// sequence number the next logon corrects, three are not.
	logonRefusedAlertAfter = 3
	// defaultLogonBackoff is Config.LogonBackoff's default; maxLogonBackoff caps the doubling.
	defaultLogonBackoff = time.Second
	maxLogonBackoff     = time.Minute
)

// Alerts is the alert inbox (*alert.Inbox): refused logons (AlertLogonRefused) and refused
// queries (AlertQueryRefused) are raised in it.
type Alerts interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// logonRefusal is what the session knows of the refusals of its Logon in a row.
type logonRefusal struct {
	count   int
	text    string
	alerted bool // AlertLogonRefused raised since the last logon
}

// addCredentials puts the session file's credentials on a Logon.
func (s *Session) addCredentials(msg *quickfix.Message) {
	if s.username != "" {
		msg.Body.SetString(tag.Username, s.username)
	}
	if s.password != "" {
		msg.Body.SetString(tag.Password, s.password)
	}
}

var (
	logoutType = []byte("\x0135=5\x01")
	textTag    = []byte("\x0158=")
)

// incoming reads every message as it comes in, before the library handles it: a Logout while the
// session is not logged on answers the desk's Logon — a refusal.
func (s *Session) incoming(raw []byte) {
	if !bytes.Contains(raw, logoutType) || s.Reachable() {
		return // a Logout in session is FromAdmin's
	}
	text := ""
	if i := bytes.Index(raw, textTag); i >= 0 {
		rest := raw[i+len(textTag):]
		if j := bytes.IndexByte(rest, 1); j >= 0 {
			rest = rest[:j]
		}
		text = string(rest)
	}
	s.mu.Lock()
	s.refusal.count++
	s.refusal.text = text
	n := s.refusal.count
	s.mu.Unlock()
	s.log.Warn("the venue refused the FIX logon", slog.String("session", s.sessionID.String()), slog.String("text", text), slog.Int("inARow", n))
	select {
	case s.refused <- struct{}{}:
	default:
	}
}

// loggedOnAgain forgets the refusals (OnLogon).
func (s *Session) loggedOnAgain() {
	s.mu.Lock()
	s.refusal.count, s.refusal.text = 0, ""
	s.mu.Unlock()
}

// afterRefusal is Run's answer to a refused logon: the alert once refusals in a row reach
// logonRefusedAlertAfter, and the pause before the next logon; false when ctx ended first.
func (s *Session) afterRefusal(ctx context.Context) bool {
	s.mu.Lock()
	r := s.refusal
	raise := r.count >= logonRefusedAlertAfter
	if raise {
		s.refusal.alerted = true
	}
	s.mu.Unlock()
	wait := s.cfg.LogonBackoff << min(r.count-1, 16)
	if wait > maxLogonBackoff || wait <= 0 {
		wait = maxLogonBackoff
	}
	if raise && s.cfg.Alerts != nil {
		err := s.cfg.Alerts.Raise(ctx, AlertLogonRefused, alert.Critical,
			"The FIX venue refuses the desk's logon: "+r.text+". No order reaches the venue until it logs on; check the session file's Username, Password and sequence numbers (docs/fix.md).",
			map[string]any{"session": s.sessionID.String(), "text": r.text, "inARow": r.count})
		if err != nil {
			s.log.WarnContext(ctx, "could not raise the alert", slog.String("code", AlertLogonRefused), slog.Any("err", err))
		}
	}
	s.log.WarnContext(ctx, "FIX logon refused; logging on again after a pause", slog.Int("inARow", r.count), slog.Duration("after", wait))
	select {
	case <-ctx.Done():
		return false
	case <-time.After(wait):
		return true
	}
}

// resolveRefusal resolves AlertLogonRefused: the session logged on (untilRestart, once per
// logon), whichever process raised it.
func (s *Session) resolveRefusal(ctx context.Context) {
	s.mu.Lock()
	s.refusal.alerted = false
	s.mu.Unlock()
	if s.cfg.Alerts == nil {
		return
	}
	if err := s.cfg.Alerts.Resolve(ctx, AlertLogonRefused); err != nil {
		s.log.WarnContext(ctx, "could not resolve the alert", slog.String("code", AlertLogonRefused), slog.Any("err", err))
	}
}

// isLogon is whether a stored message body is a Logon.
func isLogon(msg []byte) bool { return bytes.Contains(msg, []byte("\x0135=A\x01")) }
