package fixvenue

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quickfixgo/enum"
	"github.com/quickfixgo/field"
	"github.com/quickfixgo/fix44/marketdataincrementalrefresh"
	"github.com/quickfixgo/fix44/marketdatarequestreject"
	"github.com/quickfixgo/fix44/marketdatasnapshotfullrefresh"
	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"

	"fxdesk/internal/sim/venuesim"
)

// Market data: the venue's second session (Config.MDVenueCompID/MDDeskCompID) streams top-of-book
// bid and offer of the symbols a MarketDataRequest subscribes, from the same Config.Prices the
// venue fills at. doc.go lists the messages.

// Message types of market data.
const (
	msgMarketDataRequest = string(enum.MsgType_MARKET_DATA_REQUEST)
	msgMDSnapshot        = string(enum.MsgType_MARKET_DATA_SNAPSHOT_FULL_REFRESH)
	msgMDIncremental     = string(enum.MsgType_MARKET_DATA_INCREMENTAL_REFRESH)
	msgMDReject          = string(enum.MsgType_MARKET_DATA_REQUEST_REJECT)
)

// Defaults of the market-data session's identity and of how often it looks for price changes.
const (
	DefaultMDVenueCompID = "FXVENUE-MD"
	DefaultMDDeskCompID  = "FXDESK-MD"
	// DefaultMarketDataInterval keeps the venue's market data within a few tens of milliseconds
	// of the feed: it reads the prices this often while anything is subscribed.
	DefaultMarketDataInterval = 25 * time.Millisecond
)

// mdQuote is one symbol's top of book as last sent to a subscription; a zero side is absent.
type mdQuote struct{ bid, ask decimal.Decimal }

// mdSubscription is one MarketDataRequest with SubscriptionRequestType 1 (snapshot + updates).
type mdSubscription struct {
	reqID      string
	symbols    []string
	bid, offer bool // the MDEntryTypes asked for
	// full answers every change with a snapshot (MDUpdateType 0) instead of an incremental.
	full bool
	last map[string]mdQuote
}

// marketData holds the subscriptions of the market-data session; they end with the session
// (market data is never replayed).
type marketData struct {
	s    *Server
	mu   sync.Mutex
	subs map[string]*mdSubscription // by MDReqID
	// requests counts MarketDataRequests received, rejected those answered with a 35=Y;
	// snapshots and incrementals count the messages sent.
	requests, rejected, snapshots, incrementals int

	stop chan struct{}
	done chan struct{}
}

func newMarketData(s *Server) *marketData {
	return &marketData{s: s, subs: map[string]*mdSubscription{}}
}

// MarketDataState is the market-data part of GET /control/state.
type MarketDataState struct {
	LoggedOn      bool     `json:"loggedOn"`
	Subscriptions []string `json:"subscriptions"` // "MDReqID:SYMBOL,SYMBOL"
	Requests      int      `json:"requests"`
	Rejected      int      `json:"rejected"`
	Snapshots     int      `json:"snapshots"`
	Incrementals  int      `json:"incrementals"`
}

func (md *marketData) state(loggedOn bool) MarketDataState {
	md.mu.Lock()
	defer md.mu.Unlock()
	st := MarketDataState{LoggedOn: loggedOn, Subscriptions: []string{}, Requests: md.requests, Rejected: md.rejected,
		Snapshots: md.snapshots, Incrementals: md.incrementals}
	for id, sub := range md.subs {
		st.Subscriptions = append(st.Subscriptions, id+":"+strings.Join(sub.symbols, ","))
	}
	slices.Sort(st.Subscriptions)
	return st
}

// start runs the poller that turns price changes into incrementals, every interval.
func (md *marketData) start(interval time.Duration) {
	md.stop, md.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(md.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-md.stop:
				return
			case <-t.C:
				md.poll()
			}
		}
	}()
}

func (md *marketData) halt() {
	if md.stop == nil {
		return
	}
	close(md.stop)
	<-md.done
	md.stop = nil
}

// reset ends every subscription: the session logged out, and a new logon subscribes afresh.
func (md *marketData) reset() {
	md.mu.Lock()
	clear(md.subs)
	md.mu.Unlock()
}

// prices reads the venue's prices once for a round; nil when there are none now.
func (md *marketData) prices() venuesim.PriceSource {
	if md.s.cfg.Prices == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	src, err := venuesim.Snapshot(ctx, md.s.cfg.Prices)
	if err != nil {
		md.s.log.Warn("fixvenue market data: no prices", slog.Any("err", err))
		return nil
	}
	return src
}

// quoteOf is symbol's top of book from src as a subscription sees it (only the sides it asked
// for); the zero mdQuote when the symbol has no price now.
func (sub *mdSubscription) quoteOf(src venuesim.PriceSource, symbol string) mdQuote {
	if src == nil {
		return mdQuote{}
	}
	bid, ask, ok := src.Quote(symbol)
	if !ok || !bid.IsPositive() || ask.LessThan(bid) {
		return mdQuote{}
	}
	var q mdQuote
	if sub.bid {
		q.bid = bid
	}
	if sub.offer {
		q.ask = ask
	}
	return q
}

// request answers a MarketDataRequest (35=V) on the market-data session.
func (md *marketData) request(msg *quickfix.Message) {
	md.mu.Lock()
	defer md.mu.Unlock()
	md.requests++
	req, reason, text := md.parseLocked(msg)
	if text != "" {
		md.rejectLocked(req.reqID, reason, text)
		return
	}
	switch req.subType {
	case enum.SubscriptionRequestType_DISABLE_PREVIOUS_SNAPSHOT_PLUS_UPDATE_REQUEST:
		delete(md.subs, req.reqID)
		return
	case enum.SubscriptionRequestType_SNAPSHOT:
		src := md.prices()
		for _, sym := range req.sub.symbols {
			md.sendSnapshotLocked(req.sub, sym, req.sub.quoteOf(src, sym))
		}
		return
	}
	src := md.prices()
	for _, sym := range req.sub.symbols {
		q := req.sub.quoteOf(src, sym)
		req.sub.last[sym] = q
		md.sendSnapshotLocked(req.sub, sym, q)
	}
	md.subs[req.reqID] = req.sub
}

// mdRequest is a parsed MarketDataRequest.
type mdRequest struct {
	reqID   string
	subType enum.SubscriptionRequestType
	sub     *mdSubscription
}

// parseLocked validates a MarketDataRequest; a non-empty text is the refusal (MDReqRejReason
// reason, "" for none that fits). The session runs without a data dictionary, so the library
// keeps only the last value of a tag that repeats: the groups (NoMDEntryTypes, NoRelatedSym) are
// read from the message's own bytes, in order.
func (md *marketData) parseLocked(msg *quickfix.Message) (req mdRequest, reason enum.MDReqRejReason, text string) {
	var subType, depth, updateType string
	var entryTypes, symbols []string
	eachField(msg.Bytes(), func(t int, v []byte) {
		switch quickfix.Tag(t) {
		case tag.MDReqID:
			req.reqID = string(v)
		case tag.SubscriptionRequestType:
			subType = string(v)
		case tag.MarketDepth:
			depth = string(v)
		case tag.MDUpdateType:
			updateType = string(v)
		case tag.MDEntryType:
			entryTypes = append(entryTypes, string(v))
		case tag.Symbol:
			symbols = append(symbols, string(v))
		}
	})
	if req.reqID == "" {
		return req, "", "MDReqID (262) is required"
	}
	req.subType = enum.SubscriptionRequestType(subType)
	switch req.subType {
	case enum.SubscriptionRequestType_DISABLE_PREVIOUS_SNAPSHOT_PLUS_UPDATE_REQUEST:
		if _, ok := md.subs[req.reqID]; !ok {
			return req, "", "no subscription MDReqID " + strconv.Quote(req.reqID) + " to end"
		}
		return req, "", ""
	case enum.SubscriptionRequestType_SNAPSHOT, enum.SubscriptionRequestType_SNAPSHOT_PLUS_UPDATES:
	default:
		return req, enum.MDReqRejReason_UNSUPPORTED_SUBSCRIPTIONREQUESTTYPE,
			"SubscriptionRequestType (263) " + strconv.Quote(subType) + " is not supported: 0 snapshot, 1 snapshot + updates, 2 unsubscribe"
	}
	if _, dup := md.subs[req.reqID]; dup {
		return req, enum.MDReqRejReason_DUPLICATE_MDREQID, "MDReqID " + strconv.Quote(req.reqID) + " is subscribed already"
	}
	if depth != "0" && depth != "1" {
		return req, enum.MDReqRejReason_UNSUPPORTED_MARKETDEPTH, "MarketDepth (264) must be 1 (top of book) or 0 (the whole book, which is its top)"
	}
	sub := &mdSubscription{reqID: req.reqID, last: map[string]mdQuote{}}
	switch enum.MDUpdateType(updateType) {
	case enum.MDUpdateType_FULL_REFRESH:
		sub.full = true
	case enum.MDUpdateType_INCREMENTAL_REFRESH, "":
	default:
		return req, enum.MDReqRejReason_UNSUPPORTED_MDUPDATETYPE, "MDUpdateType (265) must be 0 (full refresh) or 1 (incremental refresh)"
	}
	if len(entryTypes) == 0 {
		return req, enum.MDReqRejReason_UNSUPPORTED_MDENTRYTYPE, "NoMDEntryTypes (267) must list 0 (bid) and/or 1 (offer)"
	}
	for _, et := range entryTypes {
		switch enum.MDEntryType(et) {
		case enum.MDEntryType_BID:
			sub.bid = true
		case enum.MDEntryType_OFFER:
			sub.offer = true
		default:
			return req, enum.MDReqRejReason_UNSUPPORTED_MDENTRYTYPE, "MDEntryType (269) " + strconv.Quote(et) + " is not served: only 0 (bid) and 1 (offer)"
		}
	}
	if len(symbols) == 0 {
		return req, enum.MDReqRejReason_UNKNOWN_SYMBOL, "NoRelatedSym (146) must list at least one symbol"
	}
	for _, sym := range symbols {
		if !md.s.instruments[sym] {
			return req, enum.MDReqRejReason_UNKNOWN_SYMBOL, "unknown symbol " + strconv.Quote(sym)
		}
		if !slices.Contains(sub.symbols, sym) {
			sub.symbols = append(sub.symbols, sym)
		}
	}
	req.sub = sub
	return req, "", ""
}

// eachField calls fn with every tag=value field of a FIX message, in order.
func eachField(msg []byte, fn func(tag int, value []byte)) {
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
		if t, err := strconv.Atoi(string(k)); err == nil {
			fn(t, v)
		}
	}
}

// rejectLocked answers a request with a MarketDataRequestReject (35=Y).
func (md *marketData) rejectLocked(reqID string, reason enum.MDReqRejReason, text string) {
	md.rejected++
	m := marketdatarequestreject.New(field.NewMDReqID(reqID))
	if reason != "" {
		m.SetMDReqRejReason(reason)
	}
	m.SetText(text)
	md.s.log.Info("market data request refused", slog.String("mdReqId", reqID), slog.String("reason", string(reason)), slog.String("text", text))
	md.s.sendMD(m.ToMessage())
}

// sendSnapshotLocked sends a MarketDataSnapshotFullRefresh (35=W) of symbol: its bid and offer,
// or no entries when it has no price now.
func (md *marketData) sendSnapshotLocked(sub *mdSubscription, symbol string, q mdQuote) {
	md.snapshots++
	m := marketdatasnapshotfullrefresh.New()
	m.SetMDReqID(sub.reqID)
	m.SetSymbol(symbol)
	g := marketdatasnapshotfullrefresh.NewNoMDEntriesRepeatingGroup()
	now := md.s.cfg.Now().UTC()
	for _, e := range []struct {
		t  enum.MDEntryType
		px decimal.Decimal
	}{{enum.MDEntryType_BID, q.bid}, {enum.MDEntryType_OFFER, q.ask}} {
		if e.px.IsZero() {
			continue
		}
		row := g.Add()
		row.SetMDEntryType(e.t)
		row.SetString(tag.MDEntryPx, e.px.String())
		row.SetMDEntryDate(now.Format(mdDate))
		row.SetMDEntryTime(now.Format(mdTime))
	}
	m.SetNoMDEntries(g)
	md.s.sendMD(m.ToMessage())
}

// FIX 4.4 UTCDateOnly and UTCTimeOnly (milliseconds) of MDEntryDate (272) and MDEntryTime (273).
const (
	mdDate = "20060102"
	mdTime = "15:04:05.000"
)

// poll reads the prices once and sends every subscription its changes: one incremental per
// subscription with an entry per side that changed (MDUpdateAction 0 new, 1 change, 2 delete
// when the symbol lost its price), or a snapshot per changed symbol (MDUpdateType 0).
func (md *marketData) poll() {
	md.mu.Lock()
	defer md.mu.Unlock()
	if len(md.subs) == 0 {
		return
	}
	src := md.prices()
	now := md.s.cfg.Now().UTC()
	for _, sub := range md.subs {
		var g marketdataincrementalrefresh.NoMDEntriesRepeatingGroup
		entries := 0
		for _, sym := range sub.symbols {
			q, was := sub.quoteOf(src, sym), sub.last[sym]
			if q == was {
				continue
			}
			sub.last[sym] = q
			if sub.full {
				md.sendSnapshotLocked(sub, sym, q)
				continue
			}
			if entries == 0 {
				g = marketdataincrementalrefresh.NewNoMDEntriesRepeatingGroup()
			}
			for _, side := range []struct {
				t        enum.MDEntryType
				now, was decimal.Decimal
			}{{enum.MDEntryType_BID, q.bid, was.bid}, {enum.MDEntryType_OFFER, q.ask, was.ask}} {
				if side.now.Equal(side.was) {
					continue
				}
				row := g.Add()
				entries++
				switch {
				case side.now.IsZero():
					row.SetMDUpdateAction(enum.MDUpdateAction_DELETE)
				case side.was.IsZero():
					row.SetMDUpdateAction(enum.MDUpdateAction_NEW)
				default:
					row.SetMDUpdateAction(enum.MDUpdateAction_CHANGE)
				}
				row.SetMDEntryType(side.t)
				row.SetSymbol(sym)
				if !side.now.IsZero() {
					row.SetString(tag.MDEntryPx, side.now.String())
				}
				row.SetMDEntryDate(now.Format(mdDate))
				row.SetMDEntryTime(now.Format(mdTime))
			}
		}
		if entries == 0 {
			continue
		}
		m := marketdataincrementalrefresh.New()
		m.SetMDReqID(sub.reqID)
		m.SetNoMDEntries(g)
		md.incrementals++
		md.s.sendMD(m.ToMessage())
	}
}

// sendMD writes msg to the market-data session. Its store keeps no messages (unsavedStore), so
// nothing accumulates and nothing is replayed.
func (s *Server) sendMD(msg *quickfix.Message) {
	if err := quickfix.SendToTarget(msg, s.mdSessionID); err != nil {
		s.log.Warn("fixvenue: send market data", slog.Any("err", err))
	}
}

// mdStores creates the venue's stores: in memory, and for the market-data session one that keeps
// no messages (a resend of market data is gap-filled: stale prices are worse than none).
type mdStores struct {
	md  quickfix.SessionID
	mem quickfix.MessageStoreFactory
}

func (f mdStores) Create(id quickfix.SessionID) (quickfix.MessageStore, error) {
	st, err := f.mem.Create(id)
	if err != nil || id != f.md {
		return st, err
	}
	return unsavedStore{st}, nil
}

// unsavedStore keeps the sequence numbers and no messages.
type unsavedStore struct{ quickfix.MessageStore }

func (unsavedStore) SaveMessage(int, []byte) error { return nil }
func (s unsavedStore) SaveMessageAndIncrNextSenderMsgSeqNum(int, []byte) error {
	return s.IncrNextSenderMsgSeqNum()
}

// refuseMarketData answers a MarketDataRequest that came on the trade session: market data has
// its own session (MDReqRejReason 3, insufficient permissions, names it).
func (s *Server) refuseMarketData(reqID string) {
	m := marketdatarequestreject.New(field.NewMDReqID(reqID))
	m.SetMDReqRejReason(enum.MDReqRejReason_INSUFFICIENT_PERMISSIONS)
	m.SetText("market data is served on the session " + s.cfg.MDDeskCompID + " -> " + s.cfg.MDVenueCompID + ", not on the trade session")
	s.send(m.ToMessage())
}
