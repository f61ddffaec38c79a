package fixmd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	"github.com/quickfixgo/fix44/marketdatarequest"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
)

// Message types the source reads and writes.
const (
	msgLogon         = string(enum.MsgType_LOGON)
	msgLogout        = string(enum.MsgType_LOGOUT)
	msgSnapshot      = string(enum.MsgType_MARKET_DATA_SNAPSHOT_FULL_REFRESH)
	msgIncremental   = string(enum.MsgType_MARKET_DATA_INCREMENTAL_REFRESH)
	msgRequestReject = string(enum.MsgType_MARKET_DATA_REQUEST_REJECT)
)

// The Source is its initiator's quickfix.Application.

// OnCreate is the library's notice that the session exists.
func (s *Source) OnCreate(quickfix.SessionID) {}

// OnLogon tells Run the session is up; Run subscribes.
func (s *Source) OnLogon(quickfix.SessionID) {
	s.mu.Lock()
	s.loggedOn = true
	s.mu.Unlock()
	s.signal()
}

// OnLogout ends the attempt: Run reconnects after its back-off.
func (s *Source) OnLogout(quickfix.SessionID) {
	s.mu.Lock()
	text := s.logoutText
	s.loggedOn = false
	s.mu.Unlock()
	why := errors.New("logged out")
	if text != "" {
		why = fmt.Errorf("logged out: %s", text)
	}
	s.end(why)
}

// ToAdmin puts the credentials on the Logon.
func (s *Source) ToAdmin(msg *quickfix.Message, _ quickfix.SessionID) {
	if t, _ := msg.MsgType(); t == msgLogon && s.cfg.Password != "" {
		msg.Body.SetString(tag.Username, s.cfg.Username)
		msg.Body.SetString(tag.Password, s.cfg.Password)
	}
}

// FromAdmin keeps the Text of a Logout: a venue says there why it refused the logon.
func (s *Source) FromAdmin(msg *quickfix.Message, _ quickfix.SessionID) quickfix.MessageRejectError {
	if t, _ := msg.MsgType(); t == msgLogout {
		text, _ := msg.Body.GetString(tag.Text)
		s.mu.Lock()
		s.logoutText = text
		s.mu.Unlock()
	}
	return nil
}

// ToApp sends what Run asked for; a MarketDataRequest is never resent (a reconnect subscribes
// afresh).
func (s *Source) ToApp(msg *quickfix.Message, _ quickfix.SessionID) error {
	if dup, err := msg.Header.GetBool(tag.PossDupFlag); err == nil && dup {
		return quickfix.ErrDoNotSend
	}
	return nil
}

// FromApp reads market data into the top of book, under the source's lock and nothing else:
// it never waits on the engine.
func (s *Source) FromApp(msg *quickfix.Message, _ quickfix.SessionID) quickfix.MessageRejectError {
	t, err := msg.MsgType()
	if err != nil {
		return err
	}
	switch t {
	case msgSnapshot, msgIncremental:
		s.apply(parseMarketData(msg.Bytes(), t == msgSnapshot))
	case msgRequestReject:
		reqID, _ := msg.Body.GetString(tag.MDReqID)
		reason, _ := msg.Body.GetString(tag.MDReqRejReason)
		text, _ := msg.Body.GetString(tag.Text)
		s.refuse(reqID, reason, text)
	}
	return nil
}

// follow brings the subscriptions to wanted: a MarketDataRequest per symbol not yet subscribed
// (nor refused since the logon), an unsubscribe per symbol no longer wanted.
func (s *Source) follow(wanted []string) {
	var add, drop []string
	var dropIDs []string
	s.mu.Lock()
	for _, sym := range wanted {
		if _, ok := s.subscribed[sym]; !ok {
			if _, no := s.refused[sym]; !no {
				add = append(add, sym)
			}
		}
	}
	for sym, id := range s.subscribed {
		if !slices.Contains(wanted, sym) {
			drop, dropIDs = append(drop, sym), append(dropIDs, id)
			delete(s.subscribed, sym)
			delete(s.reqs, id)
			delete(s.books, sym)
			delete(s.pending, sym)
		}
	}
	ids := make([]string, len(add))
	for i, sym := range add {
		s.nextReq++
		ids[i] = sym + "-" + strconv.FormatUint(s.nextReq, 10)
		s.subscribed[sym] = ids[i]
		s.reqs[ids[i]] = sym
	}
	s.mu.Unlock()
	for i, sym := range drop {
		s.request(dropIDs[i], sym, enum.SubscriptionRequestType_DISABLE_PREVIOUS_SNAPSHOT_PLUS_UPDATE_REQUEST)
	}
	for i, sym := range add {
		s.request(ids[i], sym, enum.SubscriptionRequestType_SNAPSHOT_PLUS_UPDATES)
	}
	if len(add)+len(drop) > 0 {
		s.log.Debug("FIX market data subscriptions", slog.Any("subscribe", add), slog.Any("unsubscribe", drop))
	}
}

// request sends a MarketDataRequest for one desk symbol: bid and offer, top of book,
// incremental updates.
func (s *Source) request(reqID, symbol string, subType enum.SubscriptionRequestType) {
	m := marketdatarequest.New(field.NewMDReqID(reqID), field.NewSubscriptionRequestType(subType), field.NewMarketDepth(1))
	m.SetMDUpdateType(enum.MDUpdateType_INCREMENTAL_REFRESH)
	types := marketdatarequest.NewNoMDEntryTypesRepeatingGroup()
	types.Add().SetMDEntryType(enum.MDEntryType_BID)
	types.Add().SetMDEntryType(enum.MDEntryType_OFFER)
	m.SetNoMDEntryTypes(types)
	syms := marketdatarequest.NewNoRelatedSymRepeatingGroup()
	syms.Add().SetSymbol(s.cfg.venueSymbol(symbol))
	m.SetNoRelatedSym(syms)
	if err := quickfix.SendToTarget(m.ToMessage(), s.sessionID); err != nil {
		// The session is gone: the next logon subscribes again.
		s.log.Warn("FIX market data request not sent", slog.String("symbol", symbol), slog.Any("err", err))
	}
}

// refuse records the venue's MarketDataRequestReject of reqID.
func (s *Source) refuse(reqID, reason, text string) {
	s.mu.Lock()
	sym, ok := s.reqs[reqID]
	if ok {
		delete(s.reqs, reqID)
		delete(s.subscribed, sym)
		delete(s.books, sym)
		delete(s.pending, sym)
		why := text
		if reason != "" {
			why = "MDReqRejReason " + reason + ": " + text
		}
		s.refused[sym] = why
	}
	s.mu.Unlock()
	s.log.Warn("FIX market data request refused", slog.String("symbol", sym), slog.String("mdReqId", reqID),
		slog.String("reason", reason), slog.String("text", text))
}

// mdEntry is one entry of a snapshot or an incremental.
type mdEntry struct {
	action    byte // MDUpdateAction: '0' new, '1' change, '2' delete; a snapshot's are '0'
	entryType byte // '0' bid, '1' offer
	symbol    string
	px        float64
	at        time.Time
}

// marketData is one parsed W or X.
type marketData struct {
	snapshot bool
	reqID    string
	symbol   string // a snapshot's
	sent     time.Time
	entries  []mdEntry
}

// parseMarketData reads a W or an X from its own bytes, in order: the session has no data
// dictionary, so the library keeps only the last value of a tag that repeats.
func parseMarketData(msg []byte, snapshot bool) marketData {
	md := marketData{snapshot: snapshot}
	inEntries := false
	var cur *mdEntry
	var date []byte
	next := func() *mdEntry {
		md.entries = append(md.entries, mdEntry{action: '0'})
		date = nil
		return &md.entries[len(md.entries)-1]
	}
	for len(msg) > 0 {
		f := msg
		if i := bytes.IndexByte(msg, 1); i >= 0 {
			f, msg = msg[:i], msg[i+1:]
		} else {
			msg = nil
		}
		k, v, ok := bytes.Cut(f, []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "52": // SendingTime
			md.sent, _ = time.Parse("20060102-15:04:05", string(v))
		case "262":
			md.reqID = string(v)
		case "268": // NoMDEntries
			inEntries = true
		case "279": // MDUpdateAction starts an incremental's entry
			if inEntries && !snapshot && len(v) == 1 {
				cur = next()
				cur.action = v[0]
			}
		case "269": // MDEntryType starts a snapshot's entry
			if !inEntries {
				continue
			}
			if snapshot {
				cur = next()
			}
			if cur != nil && len(v) == 1 {
				cur.entryType = v[0]
			}
		case "55":
			if cur != nil {
				cur.symbol = string(v)
			} else if !inEntries {
				md.symbol = string(v)
			}
		case "270":
			if cur != nil {
				cur.px, _ = strconv.ParseFloat(string(v), 64)
			}
		case "272":
			date = v
		case "273":
			if cur != nil && date != nil {
				cur.at, _ = time.Parse("2006010215:04:05", string(date)+string(v))
			}
		}
	}
	return md
}

// apply updates the top of book with md and leaves the newest quote of every symbol it completed
// for Run.
func (s *Source) apply(md marketData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reqSym, subscribed := s.reqs[md.reqID]
	if !subscribed {
		return // an unsubscribed symbol's last messages, or another session's request
	}
	touched := map[string]time.Time{}
	if md.snapshot {
		b := s.book(reqSym)
		*b = topOfBook{}
		touched[reqSym] = md.sent
	}
	for _, e := range md.entries {
		sym := reqSym
		if e.symbol != "" {
			sym = s.cfg.deskSymbol(e.symbol)
			if _, ok := s.subscribed[sym]; !ok {
				continue
			}
		}
		b := s.book(sym)
		px := e.px
		if e.action == '2' { // delete: the side has no price now
			px = 0
		} else if e.action != '0' && e.action != '1' {
			continue
		}
		switch e.entryType {
		case '0':
			b.bid = px
		case '1':
			b.ask = px
		default:
			continue
		}
		at := e.at
		if at.IsZero() {
			at = md.sent
		}
		if at.After(touched[sym]) {
			touched[sym] = at
		}
	}
	queued := false
	for sym, at := range touched {
		b := s.books[sym]
		if b == nil || b.bid <= 0 || b.ask <= 0 {
			continue // a side without a price: nothing to quote (the engine sees the symbol silent)
		}
		if at.IsZero() {
			at = time.Now()
		}
		s.pending[sym] = quote{bid: b.bid, ask: b.ask, at: at}
		queued = true
	}
	if queued {
		s.signal()
	}
}

func (s *Source) book(sym string) *topOfBook {
	b := s.books[sym]
	if b == nil {
		b = &topOfBook{}
		s.books[sym] = b
	}
	return b
}

// logFactory sends the library's session events to slog at debug level and tells the source
// when a connection attempt failed (the library would otherwise wait for its own reconnect).
type logFactory struct{ s *Source }

func (f logFactory) Create() (quickfix.Log, error) { return fixLog(f), nil }
func (f logFactory) CreateSessionLog(quickfix.SessionID) (quickfix.Log, error) {
	return fixLog(f), nil
}

type fixLog struct{ s *Source }

func (fixLog) OnIncoming([]byte) {}
func (fixLog) OnOutgoing([]byte) {}
func (l fixLog) OnEvent(e string) {
	l.s.log.Debug("fix session", slog.String("event", e))
	if rest, ok := strings.CutPrefix(e, "Failed to connect: "); ok {
		l.s.end(fmt.Errorf("connect to %s: %s", l.s.cfg.Addr, rest))
	}
}
func (l fixLog) OnEventf(f string, a ...any) { l.OnEvent(fmt.Sprintf(f, a...)) }
