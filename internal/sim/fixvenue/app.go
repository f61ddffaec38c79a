package fixvenue

import (
	"log/slog"
	"strconv"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// Message types the venue reads and writes, as the library spells them.
const (
	msgNewOrderSingle     = string(enum.MsgType_ORDER_SINGLE)
	msgOrderStatusRequest = string(enum.MsgType_ORDER_STATUS_REQUEST)
	msgMassStatusRequest  = string(enum.MsgType_ORDER_MASS_STATUS_REQUEST)
	msgRequestForPos      = string(enum.MsgType_REQUEST_FOR_POSITIONS)
	msgRequestForPosAck   = string(enum.MsgType_REQUEST_FOR_POSITIONS_ACK)
	msgPositionReport     = string(enum.MsgType_POSITION_REPORT)
	msgExecutionReport    = string(enum.MsgType_EXECUTION_REPORT)
	msgBusinessReject     = string(enum.MsgType_BUSINESS_MESSAGE_REJECT)
	msgReject             = string(enum.MsgType_REJECT)
	msgLogon              = string(enum.MsgType_LOGON)
)

// ordMarket is OrdType (40) MARKET; the venue also executes an immediate LIMIT (limit.go).
const ordMarket = "1"

// The Server is the acceptor's quickfix.Application.

// OnCreate is the library's notice that the session exists.
func (s *Server) OnCreate(quickfix.SessionID) {}

// OnLogon marks the session up.
func (s *Server) OnLogon(id quickfix.SessionID) {
	s.mu.Lock()
	if id == s.mdSessionID {
		s.mdLoggedOn = true
	} else {
		s.loggedOn = true
	}
	s.mu.Unlock()
	s.log.Info("fix session logged on", slog.String("session", id.String()))
}

// OnLogout marks the session down; the market-data session's subscriptions end with it.
func (s *Server) OnLogout(id quickfix.SessionID) {
	s.mu.Lock()
	if id == s.mdSessionID {
		s.mdLoggedOn = false
	} else {
		s.loggedOn = false
	}
	s.mu.Unlock()
	if id == s.mdSessionID {
		s.md.reset()
	}
	s.log.Info("fix session logged out", slog.String("session", id.String()))
}

// ToAdmin leaves session messages as the library builds them.
func (s *Server) ToAdmin(*quickfix.Message, quickfix.SessionID) {}

// FromAdmin checks the desk's Logon credentials when the venue requires them (credentials.go)
// and accepts every other session message.
func (s *Server) FromAdmin(msg *quickfix.Message, _ quickfix.SessionID) quickfix.MessageRejectError {
	if t, _ := msg.MsgType(); t == msgLogon {
		return s.checkLogon(msg)
	}
	return nil
}

// ToApp refuses to resend a message with a repeating group (the library gap-fills it instead):
// QuickFIX/Go v0.9.10 writes such a resend with two checksums. Position reports and their acks
// are answers to a query the desk repeats, never records; market data is stale once resent.
func (s *Server) ToApp(msg *quickfix.Message, _ quickfix.SessionID) error {
	if !resend(msg) {
		return nil
	}
	switch t, _ := msg.MsgType(); t {
	case msgPositionReport, msgRequestForPosAck, msgMDSnapshot, msgMDIncremental, msgMDReject:
		return quickfix.ErrDoNotSend
	}
	return nil
}

// resend is whether msg goes out as a resend (PossDupFlag=Y).
func resend(msg *quickfix.Message) bool {
	dup, err := msg.Header.GetBool(tag.PossDupFlag)
	return err == nil && dup
}

// FromApp dispatches the desk's application messages: MarketDataRequests on the market-data
// session (md.go), orders and queries on the trade session.
func (s *Server) FromApp(msg *quickfix.Message, id quickfix.SessionID) quickfix.MessageRejectError {
	t, err := msg.MsgType()
	if err != nil {
		return err
	}
	if id == s.mdSessionID {
		if t != msgMarketDataRequest {
			return quickfix.UnsupportedMessageType()
		}
		s.md.request(msg)
		return nil
	}
	if t == msgMarketDataRequest {
		reqID, _ := msg.Body.GetString(tag.MDReqID)
		s.refuseMarketData(reqID)
		return nil
	}
	switch t {
	case msgOrderStatusRequest, msgMassStatusRequest, msgRequestForPos:
		if s.book.query(t) {
			s.log.Info("query ignored (fault)", slog.String("msgType", t))
			return nil
		}
	}
	switch t {
	case msgNewOrderSingle:
		if s.refuseOrder(msg) { // a refusal fault (refusal.go)
			return nil
		}
		s.newOrder(msg)
	case msgOrderStatusRequest:
		s.orderStatus(msg)
	case msgMassStatusRequest:
		s.massStatus(msg)
	case msgRequestForPos:
		return s.positionRequest(msg)
	default:
		return quickfix.UnsupportedMessageType()
	}
	return nil
}

func (s *Server) newOrder(msg *quickfix.Message) {
	clOrdID, _ := msg.Body.GetString(tag.ClOrdID)
	symbol, _ := msg.Body.GetString(tag.Symbol)
	side, _ := msg.Body.GetString(tag.Side)
	ordType, _ := msg.Body.GetString(tag.OrdType)
	qtyText, _ := msg.Body.GetString(tag.OrderQty)
	tif, _ := msg.Body.GetString(tag.TimeInForce)
	qty, qerr := decimal.NewFromString(qtyText)
	switch {
	case clOrdID == "":
		s.businessReject(msg, "ClOrdID (11) is required")
		return
	case ordType != ordMarket && ordType != ordLimit:
		s.rejectNew(msg, clOrdID, symbol, side, qty, RejectUnsupported, "only MARKET (OrdType=1) and immediate LIMIT (OrdType=2) orders")
		return
	case side != sideBuy && side != sideSell:
		s.rejectNew(msg, clOrdID, symbol, side, qty, RejectUnsupported, "Side must be 1 (buy) or 2 (sell)")
		return
	case qerr != nil || !qty.IsPositive():
		s.rejectNew(msg, clOrdID, symbol, side, qty, RejectBroker, "OrderQty must be a positive number")
		return
	case !s.instruments[symbol]:
		s.rejectNew(msg, clOrdID, symbol, side, qty, RejectUnknownSymbol, "unknown symbol "+strconv.Quote(symbol))
		return
	}
	limit, lerr := limitOf(msg, ordType)
	if lerr != "" {
		s.rejectNew(msg, clOrdID, symbol, side, qty, RejectBroker, lerr)
		return
	}
	seq, _ := msg.Header.GetInt(tag.MsgSeqNum)
	s.book.orderAt(clOrdID, symbol, side, qty, tif, limit, seq, resend(msg))
}

// rejectNew rejects an order the venue could not even book (a malformed one): it is recorded,
// so a status request and a duplicate see the same rejection.
func (s *Server) rejectNew(msg *quickfix.Message, clOrdID, symbol, side string, qty decimal.Decimal, reason int, text string) {
	seq, _ := msg.Header.GetInt(tag.MsgSeqNum)
	s.book.mu.Lock()
	o, seen := s.book.orders[clOrdID]
	if !seen {
		// Its OrdType as received: the report echoes it (FIX 4.4), whatever the venue supports.
		ordType, _ := msg.Body.GetString(tag.OrdType)
		o = &Order{ClOrdID: clOrdID, OrderID: s.book.nextID("V"), Symbol: symbol, Side: side, OrdType: ordType, Qty: qty, Time: s.cfg.Now()}
		s.book.orders[clOrdID] = o
	}
	o.sentIn(seq)
	s.book.mu.Unlock()
	if seen {
		return
	}
	s.book.reject(o, reason, text)
}

func (s *Server) orderStatus(msg *quickfix.Message) {
	clOrdID, _ := msg.Body.GetString(tag.ClOrdID)
	o, ok := s.book.status(clOrdID)
	if !ok {
		side, _ := msg.Body.GetString(tag.Side)
		symbol, _ := msg.Body.GetString(tag.Symbol)
		s.sendReport(Order{ClOrdID: clOrdID, OrderID: "NONE", Symbol: symbol, Side: side, Status: statusRejected,
			RejectReason: RejectUnknownOrder, Text: "unknown order", Time: s.cfg.Now()}, execStatus)
		return
	}
	// Still executing (OrdStatus=0): its own report follows. Held or lost: the status request is
	// how the desk finds out, so it answers.
	s.sendReport(o, execStatus)
}

func (s *Server) massStatus(msg *quickfix.Message) {
	reqID, _ := msg.Body.GetString(tag.MassStatusReqID)
	orders := s.book.all()
	for i, o := range orders {
		m := s.report(o, execStatus)
		m.Body.SetString(tag.MassStatusReqID, reqID)
		m.Body.SetInt(tag.TotNumReports, len(orders))
		if i == len(orders)-1 {
			m.Body.SetBool(tag.LastRptRequested, true)
		}
		s.send(m)
	}
	if len(orders) == 0 {
		m := s.report(Order{ClOrdID: "NONE", OrderID: "NONE", Status: statusRejected, Time: s.cfg.Now()}, execStatus)
		m.Body.SetString(tag.MassStatusReqID, reqID)
		m.Body.SetInt(tag.TotNumReports, 0)
		m.Body.SetBool(tag.LastRptRequested, true)
		s.send(m)
	}
}

// report builds the ExecutionReport of o with execType: its last execution (LastQty/LastPx,
// the whole order's unless it was split) and the order so far (CumQty/AvgPx).
func (s *Server) report(o Order, execType string) *quickfix.Message {
	m := quickfix.NewMessage()
	m.Header.SetString(tag.MsgType, msgExecutionReport)
	m.Body.SetString(tag.OrderID, o.OrderID)
	execID := o.ExecID
	if execType != execTrade || execID == "" {
		s.book.mu.Lock()
		execID = s.book.nextID("X")
		s.book.mu.Unlock()
	}
	m.Body.SetString(tag.ExecID, execID)
	m.Body.SetString(tag.ExecType, execType)
	m.Body.SetString(tag.OrdStatus, o.Status)
	if o.ClOrdID != "" { // the venue's own order may carry none (Config.OwnClOrdIDs)
		m.Body.SetString(tag.ClOrdID, o.ClOrdID)
	}
	if o.Symbol != "" {
		m.Body.SetString(tag.Symbol, o.Symbol)
	}
	side := o.Side
	if side == "" {
		side = sideBuy
	}
	m.Body.SetString(tag.Side, side)
	ordType := o.OrdType
	if ordType == "" {
		ordType = ordMarket // the venue's own orders and the orders it booked: all MARKET
	}
	m.Body.SetString(tag.OrdType, ordType)
	m.Body.SetString(tag.OrderQty, o.Qty.String())
	leaves := decimal.Zero
	if o.Status == statusNew || o.Status == statusPartial {
		leaves = o.Qty.Sub(o.CumQty)
	}
	m.Body.SetString(tag.LeavesQty, leaves.String())
	m.Body.SetString(tag.CumQty, o.CumQty.String())
	m.Body.SetString(tag.AvgPx, o.AvgPx.String())
	if o.CumQty.IsPositive() {
		// The last execution, also on a status report, so that whoever lost the trade report
		// books the same execution from it.
		m.Body.SetString(tag.LastQty, o.LastQty.String())
		m.Body.SetString(tag.LastPx, o.LastPx.String())
		m.Body.SetString(tag.SecondaryExecID, o.ExecID)
	}
	if o.Status == statusRejected {
		m.Body.SetInt(tag.OrdRejReason, o.RejectReason)
	}
	if o.Text != "" {
		m.Body.SetString(tag.Text, o.Text)
	}
	m.Body.SetField(tag.TransactTime, quickfix.FIXUTCTimestamp{Time: o.Time.UTC(), Precision: quickfix.Millis})
	return m
}

func (s *Server) sendReport(o Order, execType string) { s.send(s.report(o, execType)) }

// send writes msg to the desk's session; the library stores it (and queues it while the session
// is down, to be delivered when the desk logs on again).
func (s *Server) send(msg *quickfix.Message) {
	if err := quickfix.SendToTarget(msg, s.sessionID); err != nil {
		s.log.Warn("fixvenue: send", slog.Any("err", err))
	}
}

func (s *Server) businessReject(ref *quickfix.Message, text string) {
	m := quickfix.NewMessage()
	m.Header.SetString(tag.MsgType, msgBusinessReject)
	if seq, err := ref.Header.GetInt(tag.MsgSeqNum); err == nil {
		m.Body.SetInt(tag.RefSeqNum, seq)
	}
	t, _ := ref.MsgType()
	m.Body.SetString(tag.RefMsgType, t)
	m.Body.SetInt(tag.BusinessRejectReason, 5)
	m.Body.SetString(tag.Text, text)
	s.send(m)
}
