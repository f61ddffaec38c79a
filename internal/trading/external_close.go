package trading

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/risk"
	"fxdesk/internal/venue"
)

// Closing an EXTERNAL position: the venue closes its trade first, then the desk books the
// venue's price (or the reconciler books a close the venue made itself).

// closeExternal closes volume lots (nil: all) of EXTERNAL position id, linked to venue trade
// link: the venue closes its trade first, then the desk books the venue's price. userID 0 is
// the risk engine (own time from trigger).
func (s *Service) closeExternal(ctx context.Context, userID, id int64, link venueLink, volume *decimal.Decimal, reason fx.CloseReason, stop *risk.StopOut, trigger time.Time) (CloseResult, error) {
	attrs := []slog.Attr{slog.Int64("position_id", id), slog.String("trade_id", link.tradeID), slog.String("reason", string(reason))}
	defer s.busy.hold(&s.busy.positions, id)()
	if s.venue == nil {
		return CloseResult{}, errVenueUnavailable()
	}
	// The risk engine's close of all of it is sent as it is; a trader's or a dealer's, or a
	// partial one, is checked first.
	checked := userID != 0 || volume != nil || reason == fx.CloseDealer
	load := s.catalog.Get
	if !checked {
		// The risk engine's close of all of it: no database read before the send (own time).
		load = s.catalog.LastLoaded
	}
	cat, err := load(ctx)
	if err != nil {
		return CloseResult{}, err
	}
	in, ok := cat.Instruments[link.symbol]
	if !ok {
		return CloseResult{}, fmt.Errorf("close position %d: instrument %s is missing", id, link.symbol)
	}
	if checked {
		// A trader's (or dealer's) close is checked against the position before anything is sent: someone
		// else's position, a closed one or a bad volume must not reach the venue.
		p, err := book.LoadPosition(ctx, s.db, userID, id)
		if err != nil {
			return CloseResult{}, err
		}
		if p.Status != fx.PositionOpen {
			return CloseResult{}, errAlreadyClosed(id)
		}
		if reason == fx.CloseClient {
			// Before the venue is asked: once it closed the trade, the close is booked.
			a, err := book.LoadAccount(ctx, s.db, userID, p.AccountID)
			if err != nil {
				return CloseResult{}, err
			}
			if err := stateRefusal(a, actClose); err != nil {
				return CloseResult{}, err
			}
		}
		if in.Status == fx.InstrumentHalted {
			return CloseResult{}, book.ErrHalted(in.Symbol)
		}
		// The account group's terms: its trade mode, its volume limits.
		var group string
		if err := s.db.QueryRowContext(ctx, "SELECT `accountGroup` FROM `fx_account` WHERE `id` = ?", p.AccountID).Scan(&group); err != nil {
			return CloseResult{}, fmt.Errorf("close position %d: %w", id, err)
		}
		t, _ := termsOf(cat, group, link.symbol)
		if reason == fx.CloseClient {
			if err := checkTraderClose(t); err != nil {
				return CloseResult{}, err
			}
		}
		in = t.Instrument
		if volume != nil {
			if err := checkVolume(in, *volume); err != nil {
				return CloseResult{}, err
			}
			if volume.GreaterThan(p.Volume) {
				return CloseResult{}, fx.Errorf(fx.ECONFLICT, "Position %d has %s lots open; cannot close %s.", id, p.Volume, volume)
			}
			if rest := p.Volume.Sub(*volume); rest.IsPositive() && rest.LessThan(in.VolumeMin) {
				return CloseResult{}, fx.Errorf(fx.EINVALID, "Closing %s lots would leave %s, below %s's minimum of %s; close all or less.", volume, rest, in.Symbol, in.VolumeMin)
			}
			if volume.Equal(p.Volume) {
				volume = nil
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.venueBound)
	defer cancel()
	if err := s.gate.Admit(ctx, gate.VenueSend, append(attrs, slog.String("op", "close venue trade"))...); err != nil {
		return CloseResult{}, err
	}
	var units *decimal.Decimal
	if volume != nil {
		u := volume.Mul(in.ContractSize)
		units = &u
	}
	out, err := s.venue.CloseTrade(ctx, link.tradeID, units, trigger)
	var verr *venue.Error
	switch {
	case err == nil && out.Fill != nil:
		vol := lotsOf(in, out.Fill.Units)
		return s.bookClose(ctx, userID, id, &vol, out.Fill.Price, out.Fill.Transactions(), reason, stop)
	case err == nil && out.Cancelled != nil:
		e := fx.Errorf(fx.ECONFLICT, "Position %d was not closed: %s (%s).", id, cancelText(out.Cancelled.Reason), out.Cancelled.Reason)
		return CloseResult{}, book.MarketState(e)
	case err == nil:
		s.log.LogAttrs(ctx, slog.LevelError, "venue answered a close with neither a fill nor a cancel; the reconciler books what the venue did", attrs...)
		return CloseResult{}, errVenueOutcomeUnknown
	case errors.As(err, &verr) && verr.Status == 404:
		// The venue no longer has the trade open: it closed it itself (a venue stop-out) or an
		// earlier close whose answer was lost did. The reconciler books each of its fills the
		// desk has not booked at that fill's own price; nothing is sent again.
		s.log.LogAttrs(ctx, slog.LevelInfo, "venue has no open trade for an EXTERNAL position; the reconciler books its close", append(attrs, slog.Any("err", err))...)
		return CloseResult{}, closedAtVenue{id}
	case errors.As(err, &verr):
		level := slog.LevelError
		if verr.Code == venue.CodeCloseInFlight {
			// Another close of the trade is in flight (a trader's and the risk engine's decided
			// at once): expected, nothing was sent, and that close books the position.
			level = slog.LevelInfo
		}
		s.log.LogAttrs(ctx, level, "venue refused a close", append(attrs, slog.Any("err", err))...)
		return CloseResult{}, fx.Errorf(fx.ECONFLICT, "The venue refused to close position %d: %s", id, verr.Message)
	case errors.Is(err, gate.ErrNotHolder):
		return CloseResult{}, err
	case errors.Is(err, venue.ErrNotSent):
		return CloseResult{}, errVenueUnavailable()
	default:
		s.log.LogAttrs(ctx, slog.LevelWarn, "venue close outcome unknown; the position stays open until the reconciler books what the venue did", append(attrs, slog.Any("err", err))...)
		return CloseResult{}, errVenueOutcomeUnknown
	}
}

// bookClose books a venue close of volume lots (nil: all) of position id at the venue's price
// through the group commit, from the venue transactions txIDs (oldest first; the last is the
// deal's). userID 0: any owner (the risk engine, the reconciler).
func (s *Service) bookClose(ctx context.Context, userID, id int64, volume *decimal.Decimal, price decimal.Decimal, txIDs []int64, reason fx.CloseReason, stop *risk.StopOut) (CloseResult, error) {
	w := &closeWrite{s: s, Queued: book.NewQueued(ctx, gate.Close, "book venue close", 0, slog.Int64("position_id", id), slog.String("reason", string(reason))),
		userID: userID, id: id, volume: volume, reason: reason, stop: stop, venuePrice: &price}
	if n := len(txIDs); n > 0 {
		w.txID, w.alsoBooked = txIDs[n-1], txIDs[:n-1]
	}
	s.commits.Submit(w)
	if w.Err != nil {
		if !errors.Is(w.Err, risk.ErrAlreadyClosed) {
			s.log.ErrorContext(ctx, "venue closed a trade the desk could not book; the reconciler books it", slog.Int64("position_id", id), slog.Any("err", w.Err))
		}
		return CloseResult{}, w.Err
	}
	s.reportReset(ctx, w)
	return w.res, nil
}

// BookVenueClose books what the venue closed of position id and nobody booked: volume lots (nil:
// all that is open) at the venue's price, from venue transaction txID. The reconciler's
// CloseDeskSide and BookPartial.
func (b *ABook) BookVenueClose(ctx context.Context, id int64, volume *decimal.Decimal, price decimal.Decimal, txID int64) error {
	s := b.s
	_, err := s.bookClose(ctx, 0, id, volume, price, []int64{txID}, fx.CloseVenue, nil)
	return err
}

// closedAtVenue answers a close of a position whose venue trade is already closed: the trader
// is told, and the risk engine stops watching it (risk.ErrAlreadyClosed) until the reconciler's
// booking reports it closed.
type closedAtVenue struct{ id int64 }

func (e closedAtVenue) Error() string {
	return fmt.Sprintf("Position %d was already closed at the venue; the desk books the venue's close within a minute.", e.id)
}

func (e closedAtVenue) Unwrap() []error {
	return []error{&fx.Error{Code: fx.ECONFLICT, Message: e.Error()}, risk.ErrAlreadyClosed}
}

// errLinked refuses a desk-priced close of an EXTERNAL position: the venue closes it first.
type errLinked struct{ link venueLink }

func (e errLinked) Error() string { return "position is linked to venue trade " + e.link.tradeID }
