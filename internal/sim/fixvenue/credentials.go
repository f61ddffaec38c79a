package fixvenue

import (
	"crypto/subtle"
	"log/slog"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// checkLogon refuses the desk's Logon when the venue requires credentials (Config.Password) and
// the Logon does not carry them (Username 553, Password 554): the library answers with a Logout
// whose Text is the refusal's and drops the connection, as an LP does. The password is never
// logged, the username is.
func (s *Server) checkLogon(msg *quickfix.Message) quickfix.MessageRejectError {
	if s.cfg.Password == "" {
		return nil
	}
	user, _ := msg.Body.GetString(tag.Username)
	pass, _ := msg.Body.GetString(tag.Password)
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Username)) == 1
	passOK := subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.Password)) == 1
	if userOK && passOK {
		return nil
	}
	text := "invalid username or password"
	if pass == "" {
		text = "logon refused: Username (553) and Password (554) are required"
	}
	s.mu.Lock()
	s.logonsRefused++
	s.mu.Unlock()
	s.log.Warn("fix logon refused", slog.String("username", user), slog.Bool("passwordGiven", pass != ""), slog.String("text", text))
	return quickfix.RejectLogon{Text: text}
}
