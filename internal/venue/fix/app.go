package fix

import (
	"log/slog"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// Message types the session reads and writes, as the library spells them.
const (
	msgNewOrderSingle     = string(enum.MsgType_ORDER_SINGLE)
	msgOrderStatusRequest = string(enum.MsgType_ORDER_STATUS_REQUEST)
	msgMassStatusRequest  = string(enum.MsgType_ORDER_MASS_STATUS_REQUEST)
	msgRequestForPos      = string(enum.MsgType_REQUEST_FOR_POSITIONS)
	msgRequestForPosAck   = string(enum.MsgType_REQUEST_FOR_POSITIONS_ACK)
	msgPositionReport     = string(enum.MsgType_POSITION_REPORT)
	msgExecutionReport    = string(enum.MsgType_EXECUTION_REPORT)
	msgBusinessReject     = string(enum.MsgType_BUSINESS_MESSAGE_REJECT)
	msgLogout             = string(enum.MsgType_LOGOUT)
	msgReject             = string(enum.MsgType_REJECT)
	msgLogon              = string(enum.MsgType_LOGON)
)

// The Session is its initiator's quickfix.Application.

// OnCreate is the library's notice that the session exists.
func (s *Session) OnCreate(quickfix.SessionID) {}

// OnLogon marks the venue reachable.
func (s *Session) OnLogon(id quickfix.SessionID) {
	s.logons.Add(1)
	s.mu.Lock()
	s.loggedOn = true
	s.mu.Unlock()
	s.loggedOnAgain()
	s.log.Info("FIX session logged on", slog.String("session", id.String()))
}

// OnLogout marks the venue unreachable: sends are refused (not sent) until the next logon.
func (s *Session) OnLogout(id quickfix.SessionID) {
	s.mu.Lock()
	s.loggedOn = false
	s.mu.Unlock()
	s.log.Warn("FIX session logged out; orders are refused until it logs on again", slog.String("session", id.String()))
}

// ToAdmin puts the session file's credentials on every Logon (logon.go) and leaves the other
// session messages as the library builds them.
func (s *Session) ToAdmin(msg *quickfix.Message, _ quickfix.SessionID) {
	if t, _ := msg.MsgType(); t == msgLogon {
		s.addCredentials(msg)
	}
}

// FromAdmin accepts the venue's session messages. A Logout with a reason is logged with it: a
// venue that refuses the logon says why there ("MsgSeqNum too low, expecting 19 but received 4"),
// and the library reports it only at debug level.
func (s *Session) FromAdmin(msg *quickfix.Message, id quickfix.SessionID) quickfix.MessageRejectError {
	t, _ := msg.MsgType()
	if t == msgReject {
		if s.rejectedQuery(msg) {
			return nil
		}
		if r, ok := s.orderRefused(msg, t); ok {
			s.take(msg, inbound{report: &r})
		}
		return nil
	}
	if t == msgLogout {
		if text, err := msg.Body.GetString(tag.Text); err == nil && text != "" {
			s.log.Warn("the venue logged the FIX session out", slog.String("session", id.String()), slog.String("text", text))
		}
	}
	return nil
}

// ToApp lets the library resend an order (the same ClOrdID: the venue executes it once) but not a
// query: a status, mass status or position request answered late would answer nobody, and the
// query asks again itself after its patience (query.go). Only a query carries a repeating group
// (RequestForPositions' Parties), so no resend meets the library's double-checksum defect with
// repeating groups (QuickFIX/Go v0.9.10).
func (s *Session) ToApp(msg *quickfix.Message, _ quickfix.SessionID) error {
	dup, err := msg.Header.GetBool(tag.PossDupFlag)
	if err != nil || !dup {
		if t, _ := msg.MsgType(); t == msgNewOrderSingle {
			s.noteSent(msg)
		}
		return nil
	}
	if t, _ := msg.MsgType(); t != msgNewOrderSingle {
		return quickfix.ErrDoNotSend
	}
	return nil
}

// FromApp hands what the venue reports to the intake, which journals the reports in batches and
// answers whoever waits for them (intake.go). The library counts the message as received when
// this returns; the store holds the persisted incoming number back until the message is
// handled, so a process that dies first is resent it on its next logon.
func (s *Session) FromApp(msg *quickfix.Message, _ quickfix.SessionID) quickfix.MessageRejectError {
	t, err := msg.MsgType()
	if err != nil {
		return err
	}
	m := inbound{}
	switch t {
	case msgExecutionReport:
		r := parseReport(msg)
		m.report = &r
	case msgRequestForPosAck:
		a := parsePositionAck(msg)
		m.then = func() { s.onPositionAck(a) }
	case msgPositionReport:
		p := parsePositionReport(msg)
		m.then = func() { s.onPositionReport(p) }
	case msgBusinessReject:
		if s.rejectedQuery(msg) {
			return nil
		}
		r, ok := s.orderRefused(msg, t)
		if !ok {
			return nil
		}
		m.report = &r
	default:
		return quickfix.UnsupportedMessageType()
	}
	s.take(msg, m)
	return nil
}

// take hands m, read from msg, to the intake; the store persists no incoming number past msg
// until the intake has handled it.
func (s *Session) take(msg *quickfix.Message, m inbound) {
	if st := s.store.Load(); st != nil {
		if seq, err := msg.Header.GetInt(tag.MsgSeqNum); err == nil {
			m.release = st.hold(seq)
		}
	}
	s.intake.add(m)
}

// report is one ExecutionReport as the desk reads it.
type report struct {
	ExecID, ExecType, OrdStatus, ClOrdID, OrderID string
	Symbol, Side                                  string
	OrderQty, CumQty, AvgPx, LastQty, LastPx      decimal.Decimal
	RejectReason                                  int
	HasRejectReason                               bool
	Text                                          string
	MassStatusReqID                               string
	LastRptRequested                              bool
	Time                                          time.Time
	// Refused marks the rejection the desk reads from a Reject or BusinessMessageReject of the
	// order (refusal.go), not a report: it ends an order the journal holds unfinished, nothing else.
	Refused bool
}

func parseReport(msg *quickfix.Message) report {
	str := func(t quickfix.Tag) string { v, _ := msg.Body.GetString(t); return v }
	dec := func(t quickfix.Tag) decimal.Decimal {
		d, err := decimalOf(str(t))
		if err != nil {
			return decimal.Zero
		}
		return d
	}
	r := report{ExecID: str(tag.ExecID), ExecType: str(tag.ExecType), OrdStatus: str(tag.OrdStatus), ClOrdID: str(tag.ClOrdID),
		OrderID: str(tag.OrderID), Symbol: str(tag.Symbol), Side: str(tag.Side), OrderQty: dec(tag.OrderQty), CumQty: dec(tag.CumQty),
		AvgPx: dec(tag.AvgPx), LastQty: dec(tag.LastQty), LastPx: dec(tag.LastPx), Text: str(tag.Text), MassStatusReqID: str(tag.MassStatusReqID)}
	if v, err := msg.Body.GetBool(tag.LastRptRequested); err == nil {
		r.LastRptRequested = v
	}
	if v, err := msg.Body.GetInt(tag.OrdRejReason); err == nil {
		r.RejectReason, r.HasRejectReason = v, true
	}
	if tm, err := msg.Body.GetTime(tag.TransactTime); err == nil {
		r.Time = tm
	}
	return r
}

// decimalOf reads a FIX decimal field's text.
func decimalOf(s string) (decimal.Decimal, error) { return decimal.NewFromString(s) }
