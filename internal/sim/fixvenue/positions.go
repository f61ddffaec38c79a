package fixvenue

import (
	"strconv"

	"github.com/quickfixgo/quickfix"
	"github.com/quickfixgo/tag"
	"github.com/shopspring/decimal"
)

// How the venue answers RequestForPositions (Config.PositionReports). Real liquidity providers
// report a position with several NoPositions entries, one per position type (TQ: the current
// position, SOD: at the start of the day, …), or each type in a report of its own; the desk must
// read them per entry by PosType (docs/fix.md, «Positions»).
const (
	PositionsTQ    = "tq"     // one report per symbol, one entry: TQ
	PositionsTQSOD = "tq+sod" // one report per symbol, two entries: TQ, then SOD
	PositionsSplit = "split"  // two reports per symbol: one TQ entry, one SOD entry
)

// Position types (PosType 703).
const (
	posTypeTQ  = "TQ"  // transaction quantity: the position now
	posTypeSOD = "SOD" // start of day
)

// PosReqResult (728) and PosReqStatus (729) values the venue answers with.
const (
	posResultValid         = 0
	posResultNoPositions   = 2
	posResultNotAuthorized = 3
	posStatusCompleted     = 0
	posStatusRejected      = 2
)

// posEntry is one NoPositions entry: a position type and its signed units.
type posEntry struct {
	posType string
	units   decimal.Decimal
}

// positionRequest answers a RequestForPositions: an ack with the number of reports to come
// (TotalNumPosReports, also on every report), then the reports as Config.PositionReports shapes
// them. It refuses a request without Parties when Config.RequireParties (a session Reject, as an
// engine validating against the FIX 4.4 dictionary does), and a request a FaultRefuse meets with
// an ack PosReqStatus=2.
func (s *Server) positionRequest(msg *quickfix.Message) quickfix.MessageRejectError {
	if s.cfg.RequireParties && !msg.Body.Has(tag.NoPartyIDs) {
		return quickfix.RequiredTagMissing(tag.NoPartyIDs)
	}
	reqID, _ := msg.Body.GetString(tag.PosReqID)
	account, _ := msg.Body.GetString(tag.Account)
	ack := quickfix.NewMessage()
	ack.Header.SetString(tag.MsgType, msgRequestForPosAck)
	ack.Body.SetString(tag.PosMaintRptID, reqID+"-ack")
	ack.Body.SetString(tag.PosReqID, reqID)
	ack.Body.SetString(tag.Account, account)
	ack.Body.SetInt(tag.AccountType, 1)
	if refused, f := s.book.refused(); refused {
		result := f.Reason
		if result == 0 {
			result = posResultNotAuthorized
		}
		ack.Body.SetInt(tag.TotalNumPosReports, 0)
		ack.Body.SetInt(tag.PosReqResult, result)
		ack.Body.SetInt(tag.PosReqStatus, posStatusRejected)
		if f.Text != "" {
			ack.Body.SetString(tag.Text, f.Text)
		}
		s.log.Info("position request refused (fault)", "posReqId", reqID)
		s.send(ack)
		return nil
	}
	positions := s.book.positions()
	// Each report's entries. The venue keeps no history of the day: its SOD entry reads flat.
	var reports [][]posEntry
	for _, p := range positions {
		tq, sod := posEntry{posTypeTQ, p.Units}, posEntry{posTypeSOD, decimal.Zero}
		switch s.cfg.PositionReports {
		case PositionsTQSOD:
			reports = append(reports, []posEntry{tq, sod})
		case PositionsSplit:
			reports = append(reports, []posEntry{tq}, []posEntry{sod})
		default:
			reports = append(reports, []posEntry{tq})
		}
	}
	ack.Body.SetInt(tag.TotalNumPosReports, len(reports))
	if len(reports) == 0 {
		ack.Body.SetInt(tag.PosReqResult, posResultNoPositions)
	} else {
		ack.Body.SetInt(tag.PosReqResult, posResultValid)
	}
	ack.Body.SetInt(tag.PosReqStatus, posStatusCompleted)
	s.send(ack)
	now := s.cfg.Now().UTC()
	i := 0
	for _, p := range positions {
		n := 1
		if s.cfg.PositionReports == PositionsSplit {
			n = 2
		}
		for range n {
			r := quickfix.NewMessage()
			r.Header.SetString(tag.MsgType, msgPositionReport)
			r.Body.SetString(tag.PosMaintRptID, reqID+"-"+strconv.Itoa(i+1))
			r.Body.SetString(tag.PosReqID, reqID)
			r.Body.SetInt(tag.TotalNumPosReports, len(reports))
			r.Body.SetInt(tag.PosReqResult, posResultValid)
			r.Body.SetString(tag.ClearingBusinessDate, now.Format("20060102"))
			r.Body.SetString(tag.Account, account)
			r.Body.SetInt(tag.AccountType, 1)
			r.Body.SetString(tag.Symbol, p.Symbol)
			r.Body.SetString(tag.SettlPrice, p.AvgPx.String())
			r.Body.SetInt(tag.SettlPriceType, 1)
			r.Body.SetString(tag.PriorSettlPrice, p.AvgPx.String())
			g := quickfix.NewRepeatingGroup(tag.NoPositions, quickfix.GroupTemplate{
				quickfix.GroupElement(tag.PosType), quickfix.GroupElement(tag.LongQty), quickfix.GroupElement(tag.ShortQty)})
			for _, en := range reports[i] {
				long, short := decimal.Zero, decimal.Zero
				if en.units.IsPositive() {
					long = en.units
				} else {
					short = en.units.Neg()
				}
				e := g.Add()
				e.SetString(tag.PosType, en.posType)
				e.SetString(tag.LongQty, long.String())
				e.SetString(tag.ShortQty, short.String())
			}
			r.Body.SetGroup(g)
			s.send(r)
			i++
		}
	}
	return nil
}

// refused pops a FaultRefuse for a position request, if one is pending.
func (b *book) refused() (bool, Fault) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refuse == 0 {
		return false, Fault{}
	}
	b.refuse--
	return true, b.refusal
}
