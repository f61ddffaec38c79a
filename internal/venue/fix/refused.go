package fix

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"

	"fxdesk/internal/alert"
)

// A query the venue refuses is answered at once as an error and raised as an alert: a liquidity
// provider that rejects the desk's position requests (a field it requires, an account it does
// not know, a permission) rejects every one, and the reconciler and the hedge monitor would
// otherwise fail each run in silence, the dealer's view showing no venue units and no mismatch.

// queryRefused raises AlertQueryRefused for query, refused with err.
func (s *Session) queryRefused(ctx context.Context, query string, err error) {
	s.log.ErrorContext(ctx, "the venue refused a FIX query", slog.String("query", query), slog.Any("err", err))
	if s.cfg.Alerts == nil {
		return
	}
	s.refusalRaised.Store(true)
	msg := fmt.Sprintf("The FIX venue refused the desk's %s: %v. The reconciler and the hedge monitor cannot read the venue's positions until it is fixed at the venue or in the session file.", query, err)
	if aerr := s.cfg.Alerts.Raise(context.WithoutCancel(ctx), AlertQueryRefused, alert.Critical, msg, map[string]string{"query": query, "refusal": err.Error()}); aerr != nil {
		s.log.ErrorContext(ctx, "could not raise the alert", slog.String("code", AlertQueryRefused), slog.Any("err", aerr))
	}
}

// queryAnswered resolves AlertQueryRefused once a query is answered again (the first answer of a
// process resolves one an earlier holder raised).
func (s *Session) queryAnswered(ctx context.Context) {
	if s.cfg.Alerts == nil || !s.refusalRaised.Swap(false) {
		return
	}
	if err := s.cfg.Alerts.Resolve(context.WithoutCancel(ctx), AlertQueryRefused); err != nil {
		s.refusalRaised.Store(true)
		s.log.WarnContext(ctx, "could not resolve the alert", slog.String("code", AlertQueryRefused), slog.Any("err", err))
	}
}

// rejectedQuery reads a session Reject (35=3) or a BusinessMessageReject (35=j) of one of the
// desk's queries and ends the queries it refers to at once; it answers whether msg referred to
// one. A RequestForPositions is matched by RefMsgType (the reject names no PosReqID).
func (s *Session) rejectedQuery(msg *quickfix.Message) bool {
	ref, _ := msg.Body.GetString(tag.RefMsgType)
	if ref != msgRequestForPos {
		return false
	}
	t, _ := msg.MsgType()
	text, _ := msg.Body.GetString(tag.Text)
	reason := ""
	if n, err := msg.Body.GetInt(tag.SessionRejectReason); err == nil {
		reason = fmt.Sprintf(" SessionRejectReason=%d", n)
	} else if n, err := msg.Body.GetInt(tag.BusinessRejectReason); err == nil {
		reason = fmt.Sprintf(" BusinessRejectReason=%d", n)
	}
	if n, err := msg.Body.GetInt(tag.RefTagID); err == nil {
		reason += fmt.Sprintf(" RefTagID=%d", n)
	}
	s.positionsRefused(fmt.Errorf("the venue rejected it (35=%s%s): %q", t, reason, text))
	return true
}
