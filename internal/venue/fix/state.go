package fix

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"

	"fxdesk/internal/venue"
)

// The venue's state as the reconciler and the hedge monitor read it (venue.API), built from the
// journal after the venue was asked about every order without a final report.

// A trade's public id (venue.Trade.ID, the desk's venueTradeId) is its first opening
// execution's journal id, as an OANDA trade's is the fill that opened it: a number in the same
// sequence as the transactions the reconciler's cursor counts. Its key is its opening ClOrdID
// (venue.Trade.ClientID).

// trade is the desk trade whose public id is id, as the reconciler reads it: a closed one says
// what the desk's own closes of it executed past it (venue.Trade.ClosedPast), which the plan
// counts when it squares the trade's position with its fills. A close's own outcome reads the
// trade by its key and needs none of it, so that costs a close no statement.
func (s *Session) trade(ctx context.Context, id string) (venue.Trade, bool, error) {
	key, found, err := s.journal.tradeKey(ctx, id)
	if err != nil || !found {
		return venue.Trade{}, false, err
	}
	t, found, err := s.tradeByKey(ctx, key)
	if err != nil || !found || t.State != venue.TradeClosed {
		return t, found, err
	}
	// Only a trade at zero can have had a close of its own go past it.
	if t.ClosedPast, err = s.journal.closedPast(ctx, key); err != nil {
		return venue.Trade{}, false, err
	}
	return t, true, nil
}

// tradeByKey is the desk trade opened by ClOrdID key, as the journal's allocations describe it.
func (s *Session) tradeByKey(ctx context.Context, key string) (venue.Trade, bool, error) {
	shares, err := s.journal.shares(ctx, "a.`tradeId` = ?", key)
	if err != nil {
		return venue.Trade{}, false, err
	}
	ts := tradesFrom(shares)
	if len(ts) == 0 {
		return venue.Trade{}, false, nil
	}
	return ts[0], true, nil
}

// tradesFrom folds allocations into trades: a trade's opening shares are its own order's
// executions, every other share reduced or closed it.
func tradesFrom(shares []share) []venue.Trade {
	by := map[string]*venue.Trade{}
	var order []string
	openNotional := map[string]decimal.Decimal{}
	closeNotional, closed := map[string]decimal.Decimal{}, map[string]decimal.Decimal{}
	for _, sh := range shares {
		if sh.TradeID == "" {
			continue
		}
		t := by[sh.TradeID]
		if t == nil {
			t = &venue.Trade{ID: strconv.FormatInt(sh.TradeExecID, 10), ClientID: sh.TradeID, Tag: venue.Tag, Symbol: sh.Symbol}
			by[sh.TradeID] = t
			order = append(order, sh.TradeID)
		}
		t.CurrentUnits = t.CurrentUnits.Add(sh.Units)
		if sh.ClOrdID == sh.TradeID {
			if t.InitialUnits.IsZero() {
				t.OpenTime = sh.Time
			}
			t.InitialUnits = t.InitialUnits.Add(sh.Units)
			openNotional[sh.TradeID] = openNotional[sh.TradeID].Add(sh.Units.Abs().Mul(sh.Price))
			continue
		}
		t.ClosingTransactionIDs = append(t.ClosingTransactionIDs, sh.ExecutionID)
		closeNotional[sh.TradeID] = closeNotional[sh.TradeID].Add(sh.Units.Abs().Mul(sh.Price))
		closed[sh.TradeID] = closed[sh.TradeID].Add(sh.Units.Abs())
		at := sh.Time
		t.CloseTime = &at
	}
	out := make([]venue.Trade, 0, len(order))
	for _, id := range order {
		t := by[id]
		if t.InitialUnits.IsZero() {
			continue // closes of a trade whose open the journal lacks: not a trade yet
		}
		t.Price = openNotional[id].Div(t.InitialUnits.Abs()).Round(10)
		if q := closed[id]; q.IsPositive() {
			avg := closeNotional[id].Div(q).Round(10)
			t.AverageClosePrice = &avg
		}
		t.State = venue.TradeOpen
		if t.CurrentUnits.IsZero() {
			t.State = venue.TradeClosed
		} else {
			t.CloseTime = nil
		}
		out = append(out, *t)
	}
	return out
}

// OpenTrades lists the desk's open trades at the venue and, per symbol, what of the venue's net
// position they do not explain as one untagged trade ("net-SYMBOL"), which the desk only reports.
func (s *Session) OpenTrades(ctx context.Context) ([]venue.Trade, error) {
	if err := s.resolvePending(ctx); err != nil {
		return nil, err
	}
	// The venue's net first: the session is in order, so every report the venue sent before its
	// position answer is journaled by the time the answer is read, and the trades read next
	// explain all of that net that is the desk's.
	net, err := s.Positions(ctx)
	if err != nil {
		return nil, err
	}
	shares, err := s.journal.shares(ctx, "a.`tradeId` IN (SELECT x.`tradeId` FROM `fx_fix_allocation` x WHERE x.`tradeId` <> '' GROUP BY x.`tradeId` HAVING SUM(x.`units`) <> 0)")
	if err != nil {
		return nil, err
	}
	var open []venue.Trade
	desk := map[string]decimal.Decimal{}
	for _, t := range tradesFrom(shares) {
		if t.State == venue.TradeOpen {
			open = append(open, t)
			desk[t.Symbol] = desk[t.Symbol].Add(t.CurrentUnits)
		}
	}
	symbols := make([]string, 0, len(net)+len(desk))
	for sym := range net {
		symbols = append(symbols, sym)
	}
	for sym := range desk {
		if _, ok := net[sym]; !ok {
			symbols = append(symbols, sym)
		}
	}
	sort.Strings(symbols)
	for _, sym := range symbols {
		if rest := net[sym].Sub(desk[sym]); !rest.IsZero() {
			open = append(open, venue.Trade{ID: "net-" + sym, Symbol: sym, State: venue.TradeOpen, InitialUnits: rest, CurrentUnits: rest})
		}
	}
	return open, nil
}

// TradeByID is desk trade id (its first opening execution), after asking the venue about its orders
// without a final report.
func (s *Session) TradeByID(ctx context.Context, id string) (venue.Trade, bool, error) {
	if err := s.resolvePending(ctx); err != nil {
		return venue.Trade{}, false, err
	}
	return s.trade(ctx, id)
}

// TradeByClientID is the trade desk order clientID opened: the same id.
func (s *Session) TradeByClientID(ctx context.Context, clientID string) (venue.Trade, bool, error) {
	if _, _, err := s.OrderByClientID(ctx, clientID); err != nil {
		return venue.Trade{}, false, err
	}
	return s.tradeByKey(ctx, clientID)
}

// OrderByClientID is the targeted lookup of an unknown outcome: an OrderStatusRequest by ClOrdID
// unless the journal already holds the order's final report. ok is false when the venue does not
// know the order.
func (s *Session) OrderByClientID(ctx context.Context, clientID string) (venue.OrderInfo, bool, error) {
	o, found, err := s.journal.order(ctx, clientID)
	if err != nil {
		return venue.OrderInfo{}, false, err
	}
	if !found || o.Status == stateSending || o.Status == stateNew {
		known, err := s.orderStatus(ctx, clientID, o.Symbol, o.Side)
		if err != nil {
			return venue.OrderInfo{}, false, err
		}
		if !known {
			return venue.OrderInfo{}, false, nil
		}
		if o, found, err = s.journal.order(ctx, clientID); err != nil || !found {
			return venue.OrderInfo{}, false, err
		}
	}
	info := venue.OrderInfo{ID: o.VenueOrderID, ClientID: clientID, Tag: venue.Tag, Symbol: o.Symbol, Units: signed(o.Side, o.Qty), CreateTime: o.SentAt}
	switch o.Status {
	case stateFilled:
		info.State = venue.OrderFilled
		shares, err := s.journal.shares(ctx, "e.`clOrdId` = ?", clientID)
		if err != nil {
			return venue.OrderInfo{}, false, err
		}
		if len(shares) > 0 {
			info.FillingTransactionID = shares[0].ExecutionID
		}
		if o.TradeID == clientID && len(shares) > 0 {
			info.TradeOpenedID = strconv.FormatInt(shares[0].ExecutionID, 10)
		}
	case stateRejected:
		info.State, info.CancelReason = venue.OrderCancelled, cancelReason(o.RejectReason, o.Text)
	default:
		info.State = venue.OrderPending
	}
	return info, true, nil
}

// Summary is the journal's last execution and the number of open desk trades. A FIX taker
// session carries no account money: NAV and margin are zero, so the hedge monitor's margin
// alert stays silent on FIX (docs/fix.md).
func (s *Session) Summary(ctx context.Context) (venue.Summary, error) {
	last, err := s.journal.lastExecution(ctx)
	if err != nil {
		return venue.Summary{}, err
	}
	return venue.Summary{Currency: "USD", LastTransactionID: last}, nil
}

// pageSize bounds TransactionsSince, as the REST venue's page does.
const pageSize = 1000

// TransactionsSince lists the next executions after id (at most pageSize of them, by count),
// each with the desk trades it reduced or closed (Changes), oldest first. The page is counted in
// executions, never taken as the ids id+1 … id+pageSize: execution ids have gaps (a journal
// batch rolled back, a Galera cluster's auto-increment stride), and an id range over a gap is
// empty although executions follow it.
func (s *Session) TransactionsSince(ctx context.Context, id int64) ([]venue.Transaction, int64, error) {
	last, err := s.journal.lastExecution(ctx)
	if err != nil {
		return nil, 0, err
	}
	upTo, err := s.journal.pageEnd(ctx, id, pageSize)
	if err != nil {
		return nil, 0, err
	}
	shares, err := s.journal.shares(ctx, "a.`executionId` > ? AND a.`executionId` <= ?", id, upTo)
	if err != nil {
		return nil, 0, err
	}
	var out []venue.Transaction
	for _, sh := range shares {
		if len(out) == 0 || out[len(out)-1].ID != sh.ExecutionID {
			out = append(out, venue.Transaction{ID: sh.ExecutionID, Type: "ORDER_FILL", Time: sh.Time, ClientID: sh.ClOrdID, Symbol: sh.Symbol, Price: sh.Price})
		}
		tx := &out[len(out)-1]
		tx.Units = tx.Units.Add(sh.Units)
		if sh.TradeID == sh.ClOrdID {
			tx.TradeOpened = strconv.FormatInt(sh.TradeExecID, 10)
		} else if sh.TradeID != "" {
			tx.Changes = append(tx.Changes, venue.TradeChange{TradeID: strconv.FormatInt(sh.TradeExecID, 10), Units: sh.Units, Price: sh.Price})
		}
	}
	return out, last, nil
}

// positionAnswer collects the answers to one RequestForPositions (one PosReqID).
type positionAnswer struct {
	// want is how many reports answer it: TotalNumPosReports, from the ack or any report; -1
	// until one came.
	want    int
	reports int // the reports counted so far
	got     map[string]decimal.Decimal
	// complete receives the answer once every report came, or the venue's refusal; the asks of
	// one Positions call share it.
	complete chan positionResult
}

// positionResult is one Positions call's answer: the venue's net per symbol, or its refusal.
type positionResult struct {
	net     map[string]decimal.Decimal
	refused error
}

// AlertQueryRefused is raised when the venue refuses one of the desk's queries (a position
// request rejected): the reconciler and the hedge monitor cannot read the venue's positions
// until the cause (an account, a permission, a field the LP requires) is fixed.
const AlertQueryRefused = "venue-query-refused"

// Positions asks the venue for its net position per symbol (RequestForPositions). It asks again
// each patience without a complete answer (query.go), each time with a new PosReqID (a venue may
// refuse a request id it saw): the answers are collected per PosReqID, and the first complete
// collection is the answer, so a late answer to one ask never mixes with another's. An answer is
// complete when as many reports came as the venue said it sends (TotalNumPosReports), whatever
// symbols they name. A refusal (an ack with PosReqStatus rejected, or a Reject of the request)
// ends the call at once with an error and raises AlertQueryRefused; a complete answer resolves it.
func (s *Session) Positions(ctx context.Context) (map[string]decimal.Decimal, error) {
	complete := make(chan positionResult, 1)
	var ids []string
	defer func() {
		s.mu.Lock()
		for _, id := range ids {
			delete(s.positions, id)
		}
		s.mu.Unlock()
	}()
	send := func() error {
		id := "pos-" + uniqueSuffix()
		s.mu.Lock()
		s.positions[id] = &positionAnswer{want: -1, got: map[string]decimal.Decimal{}, complete: complete}
		s.mu.Unlock()
		ids = append(ids, id)
		msg := quickfix.NewMessage()
		msg.Header.SetString(tag.MsgType, msgRequestForPos)
		msg.Body.SetString(tag.PosReqID, id)
		msg.Body.SetInt(tag.PosReqType, 0) // positions
		msg.Body.SetGroup(s.parties())
		msg.Body.SetString(tag.Account, s.cfg.Account)
		msg.Body.SetInt(tag.AccountType, 1)
		msg.Body.SetString(tag.ClearingBusinessDate, time.Now().UTC().Format("20060102"))
		msg.Body.SetField(tag.TransactTime, quickfix.FIXUTCTimestamp{Time: time.Now().UTC(), Precision: quickfix.Millis})
		return s.send(msg)
	}
	q, err := s.ask("request for positions", send)
	if err != nil {
		return nil, fmt.Errorf("request for positions: %w", err)
	}
	defer q.stop()
	for {
		select {
		case got := <-complete:
			if got.refused != nil {
				s.queryRefused(ctx, "request for positions", got.refused)
				return nil, fmt.Errorf("request for positions: %w", got.refused)
			}
			s.queryAnswered(ctx)
			return got.net, nil
		case <-q.again():
			q.askAgain(ctx)
		case <-q.expired():
			return nil, fmt.Errorf("request for positions: %s: %w", q.timedOut(), venue.ErrOutcomeUnknown)
		case <-ctx.Done():
			return nil, fmt.Errorf("request for positions: %w", ctx.Err())
		}
	}
}

// Parties (453) on a RequestForPositions, which FIX 4.4 requires: the session's account as the
// position account (PartyRole 38), a proprietary code (PartyIDSource D).
const (
	partyRolePositionAccount = 38
	partyIDSourceProprietary = "D"
)

// parties is the Parties component naming the session's account.
func (s *Session) parties() *quickfix.RepeatingGroup {
	g := quickfix.NewRepeatingGroup(tag.NoPartyIDs, quickfix.GroupTemplate{
		quickfix.GroupElement(tag.PartyID), quickfix.GroupElement(tag.PartyIDSource), quickfix.GroupElement(tag.PartyRole)})
	e := g.Add()
	e.SetString(tag.PartyID, s.cfg.Account)
	e.SetString(tag.PartyIDSource, partyIDSourceProprietary)
	e.SetInt(tag.PartyRole, partyRolePositionAccount)
	return g
}

func maps(m map[string]decimal.Decimal) map[string]decimal.Decimal {
	out := make(map[string]decimal.Decimal, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// positionAck is a RequestForPositionsAck as the desk reads it.
type positionAck struct {
	id      string
	reports int // TotalNumPosReports
	result  int // PosReqResult: 0 valid, 2 no positions, else refused
	status  int // PosReqStatus: 2 rejected
	text    string
}

// PosReqResult and PosReqStatus values the desk reads.
const (
	posResultValid       = 0
	posResultNoPositions = 2
	posStatusRejected    = 2
)

func parsePositionAck(msg *quickfix.Message) positionAck {
	a := positionAck{}
	a.id, _ = msg.Body.GetString(tag.PosReqID)
	if n, err := msg.Body.GetInt(tag.TotalNumPosReports); err == nil {
		a.reports = n
	}
	a.result, _ = msg.Body.GetInt(tag.PosReqResult)
	a.status, _ = msg.Body.GetInt(tag.PosReqStatus)
	a.text, _ = msg.Body.GetString(tag.Text)
	return a
}

func (s *Session) onPositionAck(a positionAck) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pa := s.positions[a.id]
	if pa == nil {
		return
	}
	if a.status == posStatusRejected || (a.result != posResultValid && a.result != posResultNoPositions) {
		pa.refuse(fmt.Errorf("the venue refused it (PosReqResult=%d, PosReqStatus=%d): %q", a.result, a.status, a.text))
		return
	}
	if pa.want < 0 {
		pa.want = a.reports
		if a.result == posResultNoPositions {
			pa.want = 0 // "no positions": nothing follows, whatever the count says
		}
		pa.check()
	}
}

// refuse ends the answer with the venue's refusal (called with s.mu held).
func (pa *positionAnswer) refuse(err error) {
	select {
	case pa.complete <- positionResult{refused: err}:
	default:
	}
}

// positionReport is one PositionReport as the desk reads it.
type positionReport struct {
	id, symbol string
	// net is the position now: the TQ entry's LongQty − ShortQty; zero in a report without one.
	net   decimal.Decimal
	total int // TotalNumPosReports; -1 when absent
}

// Position types (PosType 703): TQ, the transaction quantity, is the position now; SOD, the start
// of day's, and the others are not.
const posTypeCurrent = "TQ"

// parsePositionReport reads one report per NoPositions entry, by PosType. The session runs
// without a data dictionary, so the library keeps only the last value of a tag that repeats (a
// report with TQ and SOD entries would read as its SOD): the entries are read from the message's
// own bytes, in order. An entry without PosType is read as the position now when it is the only
// one (a venue that reports one untyped entry).
func parsePositionReport(msg *quickfix.Message) positionReport {
	p := positionReport{total: -1}
	p.id, _ = msg.Body.GetString(tag.PosReqID)
	p.symbol, _ = msg.Body.GetString(tag.Symbol)
	if n, err := msg.Body.GetInt(tag.TotalNumPosReports); err == nil {
		p.total = n
	}
	type entry struct {
		posType     string
		long, short decimal.Decimal
	}
	var entries []*entry
	at := func() *entry {
		if len(entries) == 0 {
			entries = append(entries, &entry{})
		}
		return entries[len(entries)-1]
	}
	for _, f := range bytes.Split(msg.Bytes(), []byte{1}) {
		k, v, ok := bytes.Cut(f, []byte{'='})
		if !ok {
			continue
		}
		switch string(k) {
		case "703": // PosType starts an entry
			entries = append(entries, &entry{posType: string(v)})
		case "704": // LongQty
			if d, err := decimal.NewFromString(string(v)); err == nil {
				at().long = d
			}
		case "705": // ShortQty
			if d, err := decimal.NewFromString(string(v)); err == nil {
				at().short = d
			}
		}
	}
	for _, e := range entries {
		if e.posType == posTypeCurrent || (e.posType == "" && len(entries) == 1) {
			p.net = p.net.Add(e.long.Sub(e.short))
		}
	}
	return p
}

func (s *Session) onPositionReport(r positionReport) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pa := s.positions[r.id]
	if pa == nil {
		return
	}
	pa.reports++
	pa.got[r.symbol] = pa.got[r.symbol].Add(r.net)
	if pa.want < 0 && r.total >= 0 {
		pa.want = r.total // the ack was lost (it is never resent): each report carries the count too
	}
	pa.check()
}

// positionsRefused ends every position request in flight with the venue's refusal: a Reject
// (35=3) or BusinessMessageReject (35=j) of a RequestForPositions names no PosReqID the desk
// could match, and the asks of one call are alike.
func (s *Session) positionsRefused(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pa := range s.positions {
		pa.refuse(err)
	}
}

// check hands the answer on once it is complete (called with s.mu held). Only the first
// complete answer of a Positions call is taken; the others find its channel full.
func (pa *positionAnswer) check() {
	if pa.want >= 0 && pa.reports >= pa.want {
		select {
		case pa.complete <- positionResult{net: maps(pa.got)}:
		default:
		}
	}
}

// Sender is the session as trading and the reconciler send through it (trading.Venue,
// execution.Closer): the session's writer is the executor, so a send is written at once, with no
// pool or queue in front of it.
type Sender struct{ S *Session }

// Reachable is whether the session is logged on.
func (x Sender) Reachable() bool { return x.S.Reachable() }

// AccountID is the venue account.
func (x Sender) AccountID() string { return x.S.AccountID() }

// PlaceMarket sends o; trigger is when the order arrived (own time).
func (x Sender) PlaceMarket(ctx context.Context, o venue.MarketOrder, trigger time.Time) (venue.Outcome, error) {
	return x.S.placeMarket(ctx, o, trigger)
}

// CloseTrade closes units (nil: all) of trade tradeID; trigger is the tick or request that
// decided it.
func (x Sender) CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error) {
	return x.S.closeTrade(ctx, tradeID, units, trigger)
}

var _ venue.API = (*Session)(nil)

// massCount counts the reports answering one OrderMassStatusRequest (one MassStatusReqID):
// counted under the session's lock as the intake answers them, never queued, so a book of any
// size is counted whole.
type massCount struct {
	n      int
	err    error
	closed bool
	// finished receives the id once its last report came (or one could not be recorded); the
	// asks of one MassStatus call share it.
	finished chan string
}

// countMass adds one report (counted: an order's, not the empty "NONE" one) to mass status id's
// count; last or a report the journal could not record ends it.
func (s *Session) countMass(id string, counted, last bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mass[id]
	if m == nil || m.closed {
		return
	}
	if counted {
		m.n++
	}
	if err != nil {
		m.err = err
	}
	if last || err != nil {
		m.closed = true
		select {
		case m.finished <- id:
		default: // an earlier ask's already ended the call
		}
	}
}

// MassStatus asks the venue for the status of every order (OrderMassStatusRequest, type 7) and
// journals each answer as it journals any report; it answers how many orders the venue reported.
// Venues that offer it let an operator or a new holder catch up at once on reports it lost. It
// asks again each patience without the last report (query.go), each time with a new
// MassStatusReqID: the reports are counted per id, the first id whose last report comes is the
// answer, and the reports of the others are journaled once like any report (by CumQty).
func (s *Session) MassStatus(ctx context.Context) (int, error) {
	finished := make(chan string, 1)
	var ids []string
	defer func() {
		s.mu.Lock()
		for _, id := range ids {
			delete(s.mass, id)
		}
		s.mu.Unlock()
	}()
	send := func() error {
		id := "mass-" + uniqueSuffix()
		s.mu.Lock()
		s.mass[id] = &massCount{finished: finished}
		s.mu.Unlock()
		ids = append(ids, id)
		msg := quickfix.NewMessage()
		msg.Header.SetString(tag.MsgType, msgMassStatusRequest)
		msg.Body.SetString(tag.MassStatusReqID, id)
		msg.Body.SetInt(tag.MassStatusReqType, 7) // all orders
		return s.send(msg)
	}
	q, err := s.ask("mass status", send)
	if err != nil {
		return 0, fmt.Errorf("mass status: %w", err)
	}
	defer q.stop()
	for {
		select {
		case id := <-finished:
			s.mu.Lock()
			m := s.mass[id]
			s.mu.Unlock()
			if m.err != nil {
				return m.n, fmt.Errorf("mass status: %w", m.err)
			}
			return m.n, nil
		case <-q.again():
			q.askAgain(ctx)
		case <-q.expired():
			return 0, fmt.Errorf("mass status: the last report did not come: %s: %w", q.timedOut(), venue.ErrOutcomeUnknown)
		case <-ctx.Done():
			return 0, fmt.Errorf("mass status: %w", ctx.Err())
		}
	}
}
