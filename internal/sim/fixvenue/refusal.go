package fixvenue

import (
	"log/slog"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// Refusal faults: the next Count NewOrderSingles are refused as a message, not rejected as an
// order — the venue books nothing, so a status request about the ClOrdID later answers "unknown
// order", as a real LP's would.
const (
	// FaultSessionReject answers the order with a session-level Reject (35=3): RefSeqNum the
	// order's MsgSeqNum, RefMsgType D, SessionRejectReason the fault's reason (default 99,
	// other), Text the fault's text.
	FaultSessionReject = "session-reject"
	// FaultBusinessReject answers the order with a BusinessMessageReject (35=j): RefMsgType D,
	// BusinessRejectRefID the order's ClOrdID, BusinessRejectReason the fault's reason (default
	// 0, other), Text the fault's text.
	FaultBusinessReject = "business-reject"
)

// refuseOrder answers msg, a NewOrderSingle, with the refusal the next fault asks for, if the
// next fault is a refusal, and says whether it did.
func (s *Server) refuseOrder(msg *quickfix.Message) bool {
	f, ok := s.book.takeRefusal()
	if !ok {
		return false
	}
	clOrdID, _ := msg.Body.GetString(tag.ClOrdID)
	m := quickfix.NewMessage()
	if seq, err := msg.Header.GetInt(tag.MsgSeqNum); err == nil {
		m.Body.SetInt(tag.RefSeqNum, seq)
	}
	m.Body.SetString(tag.RefMsgType, msgNewOrderSingle)
	if f.Kind == FaultSessionReject {
		reason := f.Reason
		if reason == 0 {
			reason = 99
		}
		m.Header.SetString(tag.MsgType, msgReject)
		m.Body.SetInt(tag.SessionRejectReason, reason)
	} else {
		m.Header.SetString(tag.MsgType, msgBusinessReject)
		m.Body.SetString(tag.BusinessRejectRefID, clOrdID)
		m.Body.SetInt(tag.BusinessRejectReason, f.Reason)
	}
	if f.Text != "" {
		m.Body.SetString(tag.Text, f.Text)
	}
	s.log.Info("order refused as a message (fault)", slog.String("kind", f.Kind), slog.String("clOrdId", clOrdID))
	s.send(m)
	return true
}

// takeRefusal pops the next fault when it is a refusal (FaultSessionReject, FaultBusinessReject);
// any other stays for book.order.
func (b *book) takeRefusal() (Fault, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.faults) == 0 || (b.faults[0].Kind != FaultSessionReject && b.faults[0].Kind != FaultBusinessReject) {
		return Fault{}, false
	}
	return b.takeFault()
}
