package fix

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// A venue refuses an order as a message — a session-level Reject (35=3) naming the
// NewOrderSingle by its MsgSeqNum (RefSeqNum 45), or a BusinessMessageReject (35=j) naming it by
// its ClOrdID (BusinessRejectRefID 379) — instead of rejecting it with an ExecutionReport. Either
// says the order was not taken: nothing executed, and no report will come. The desk reads it as
// the order's rejection at once, with the LP's words: a report ExecType=8 OrdStatus=8 CumQty=0
// handed to the intake like any other, so the journal ends the order REJECTED with the text, the
// holder's trades release a close, and whoever waits gets a refusal — never an unknown outcome
// the reconciler would have to ask about (docs/fix.md, «Refusals»).

// refusedReason starts the reason of an order the venue refused as a message, so that the
// journal's text reads back as that refusal (cancelReason) and not as an OrdRejReason.
const refusedReason = "VENUE_REFUSED"

// sentOrders are the NewOrderSingles this process wrote and still waits for, by MsgSeqNum: a
// Reject names its message only by that number. Written when the library numbers the message
// (ToApp), forgotten when the send stops waiting (order); a Reject for one no longer here is
// read from the session's store (sentMessage).
type sentOrders struct {
	mu    sync.Mutex
	bySeq map[int]string
	seqOf map[string]int
}

func newSentOrders() *sentOrders {
	return &sentOrders{bySeq: map[int]string{}, seqOf: map[string]int{}}
}

func (so *sentOrders) add(seq int, clOrdID string) {
	so.mu.Lock()
	defer so.mu.Unlock()
	so.bySeq[seq], so.seqOf[clOrdID] = clOrdID, seq
}

func (so *sentOrders) forget(clOrdID string) {
	so.mu.Lock()
	defer so.mu.Unlock()
	if seq, ok := so.seqOf[clOrdID]; ok {
		delete(so.bySeq, seq)
		delete(so.seqOf, clOrdID)
	}
}

func (so *sentOrders) clOrdID(seq int) (string, bool) {
	so.mu.Lock()
	defer so.mu.Unlock()
	id, ok := so.bySeq[seq]
	return id, ok
}

// noteSent records an outgoing NewOrderSingle's number (ToApp: the library has numbered it and
// not yet written it, so no Reject can come first).
func (s *Session) noteSent(msg *quickfix.Message) {
	seq, err := msg.Header.GetInt(tag.MsgSeqNum)
	if err != nil {
		return
	}
	if id, err := msg.Body.GetString(tag.ClOrdID); err == nil {
		s.sent.add(seq, id)
	}
}

// orderRefused reads a Reject or a BusinessMessageReject: the rejection report of the order it
// refuses, or false when it refers to no order of the desk's (it is then logged with its text).
func (s *Session) orderRefused(msg *quickfix.Message, msgType string) (report, bool) {
	text, _ := msg.Body.GetString(tag.Text)
	refType, _ := msg.Body.GetString(tag.RefMsgType)
	refSeq, seqErr := msg.Body.GetInt(tag.RefSeqNum)
	var clOrdID, what string
	if msgType == msgReject {
		reason, _ := msg.Body.GetInt(tag.SessionRejectReason)
		what = fmt.Sprintf("Reject (35=3) SessionRejectReason=%d", reason)
		if ref, err := msg.Body.GetInt(tag.RefTagID); err == nil {
			what += fmt.Sprintf(" RefTagID=%d", ref)
		}
	} else {
		reason, _ := msg.Body.GetInt(tag.BusinessRejectReason)
		what = fmt.Sprintf("BusinessMessageReject (35=j) BusinessRejectReason=%d", reason)
		if refType == msgNewOrderSingle {
			clOrdID, _ = msg.Body.GetString(tag.BusinessRejectRefID)
		}
	}
	if clOrdID == "" && seqErr == nil && (refType == "" || refType == msgNewOrderSingle) {
		clOrdID = s.sentClOrdID(refSeq)
	}
	if clOrdID == "" {
		s.log.Warn("the venue refused a message", slog.String("refusal", what), slog.String("refMsgType", refType), slog.Int("refSeqNum", refSeq), slog.String("text", text))
		return report{}, false
	}
	s.log.Warn("the venue refused an order as a message; the order ends rejected", slog.String("clOrdId", clOrdID), slog.String("refusal", what), slog.String("text", text))
	// The LP's words first: the desk's order keeps the first 64 characters of a venue reason.
	reason := refusedReason + ": " + what
	if text != "" {
		reason = refusedReason + ": " + text + " (" + what + ")"
	}
	return report{ExecType: ordRejected, OrdStatus: ordRejected, ClOrdID: clOrdID, Text: truncate(reason, 255), Time: time.Now(), Refused: true}, true
}

// sentClOrdID is the ClOrdID of the NewOrderSingle this session sent as number seq: from the
// orders in flight, else from the session's store — a Reject that came after its send stopped
// waiting, or to an earlier process's order. "" when seq was no NewOrderSingle.
func (s *Session) sentClOrdID(seq int) string {
	if id, ok := s.sent.clOrdID(seq); ok {
		return id
	}
	st := s.store.Load()
	if st == nil {
		return ""
	}
	raw, err := st.sentMessage(seq)
	if err != nil || raw == nil {
		if err != nil {
			s.log.Warn("FIX: could not read the message a Reject names", slog.Int("refSeqNum", seq), slog.Any("err", err))
		}
		return ""
	}
	m := quickfix.NewMessage()
	if err := parseStored(raw); err != nil {
		return ""
	}
	if err := quickfix.ParseMessage(m, bytes.NewBuffer(raw)); err != nil {
		return ""
	}
	if t, _ := m.MsgType(); t != msgNewOrderSingle {
		return ""
	}
	id, _ := m.Body.GetString(tag.ClOrdID)
	return id
}

// sentMessage is the body of outgoing message seq as the store keeps it (nil: none), pending or
// written. It is read on the library's receive loop, for a Reject only.
func (st *sessionStore) sentMessage(seq int) ([]byte, error) {
	st.mu.Lock()
	m, ok := st.pending[seq]
	st.mu.Unlock()
	if ok {
		return m, nil
	}
	var body string
	err := st.db.QueryRow("SELECT `message` FROM `fx_fix_messages` WHERE "+sessionKey+" AND `msgseqnum` = ?", append(append([]any{}, st.where...), seq)...).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fix: read stored message %d: %w", seq, err)
	}
	return []byte(body), nil
}
