package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/gate"
	"fxdesk/internal/hedge"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// HedgeConfig builds a HedgeMonitor.
type HedgeConfig struct {
	Venue venue.API
	Desk  *trading.ABook
	// Hedge is the desk's hedge book, whose open positions the venue holds too; nil: none.
	Hedge  *hedge.Book
	Gate   Gate
	Alerts Alerts
	// MarginWarn raises venue-margin-low when the venue's marginCloseoutPercent reaches it
	// (0..1; the venue closes out at 1).
	MarginWarn decimal.Decimal
	// MinNAV raises venue-margin-low when the venue account's NAV falls below it; 0: off.
	MinNAV decimal.Decimal
	Log    *slog.Logger
}

// HedgeMonitor is runFxHedgeMonitor: the venue account's margin and the desk's EXTERNAL
// exposure against the venue's, on the holder every 60 s.
type HedgeMonitor struct {
	cfg  HedgeConfig
	last atomic.Pointer[VenueBook]
}

// VenueBook is what the last hedge monitor run saw at the venue.
type VenueBook struct {
	At                    time.Time       `json:"at"`
	Currency              string          `json:"currency"`
	NAV                   decimal.Decimal `json:"nav"`
	MarginUsed            decimal.Decimal `json:"marginUsed"`
	MarginAvailable       decimal.Decimal `json:"marginAvailable"`
	MarginCloseoutPercent decimal.Decimal `json:"marginCloseoutPercent"`
	LastTransactionID     int64           `json:"lastTransactionId"`
	// Symbols compares, per symbol, the desk's EXTERNAL units with the venue's tagged units.
	Symbols []HedgeSymbol `json:"symbols"`
}

// HedgeSymbol is one symbol at the venue: what the desk booked EXTERNAL and in its hedge book,
// and what the venue holds.
type HedgeSymbol struct {
	Symbol        string          `json:"symbol"`
	DeskUnits     decimal.Decimal `json:"deskUnits"`     // traders' EXTERNAL net, in venue units
	HedgeUnits    decimal.Decimal `json:"hedgeUnits"`    // the desk's hedge book's open net (internal/hedge)
	VenueUnits    decimal.Decimal `json:"venueUnits"`    // the venue's net of fxdesk-tagged trades
	UntaggedUnits decimal.Decimal `json:"untaggedUnits"` // the venue's net of trades without the tag
	Mismatch      bool            `json:"mismatch"`
}

// NewHedgeMonitor checks cfg.
func NewHedgeMonitor(cfg HedgeConfig) (*HedgeMonitor, error) {
	if cfg.Venue == nil || cfg.Desk == nil || cfg.Gate == nil || cfg.Alerts == nil {
		return nil, errors.New("hedge monitor: the venue, the desk, the gate and the alert inbox are required")
	}
	if cfg.MarginWarn.IsNegative() || cfg.MarginWarn.GreaterThan(decimal.NewFromInt(1)) {
		return nil, fmt.Errorf("hedge monitor: the margin warning level must be between 0 and 1, got %s", cfg.MarginWarn)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &HedgeMonitor{cfg: cfg}, nil
}

// Last is the last run's view of the venue; nil before the first.
func (h *HedgeMonitor) Last() *VenueBook { return h.last.Load() }

// Check checks the hedge once.
func (h *HedgeMonitor) Check(ctx context.Context) error {
	if err := h.cfg.Gate.Admit(ctx, gate.HedgeMonitor); err != nil {
		return err
	}
	sum, err := h.cfg.Venue.Summary(ctx)
	if err != nil {
		return fmt.Errorf("hedge monitor: venue summary: %w", err)
	}
	trades, err := h.cfg.Venue.OpenTrades(ctx)
	if err != nil {
		return fmt.Errorf("hedge monitor: venue open trades: %w", err)
	}
	exps, err := h.cfg.Desk.Exposures(ctx)
	if err != nil {
		return fmt.Errorf("hedge monitor: %w", err)
	}
	book := &VenueBook{At: time.Now().UTC(), Currency: sum.Currency, NAV: sum.NAV, MarginUsed: sum.MarginUsed, MarginAvailable: sum.MarginAvailable,
		MarginCloseoutPercent: sum.MarginCloseoutPercent, LastTransactionID: sum.LastTransactionID}
	bySymbol := map[string]*HedgeSymbol{}
	at := func(sym string) *HedgeSymbol {
		if s, ok := bySymbol[sym]; ok {
			return s
		}
		s := &HedgeSymbol{Symbol: sym}
		bySymbol[sym] = s
		return s
	}
	for _, e := range exps {
		if !e.ExternalLots.IsZero() {
			at(e.Symbol).DeskUnits = e.ExternalLots.Mul(e.ContractSize)
		}
	}
	if h.cfg.Hedge != nil {
		open, err := h.cfg.Hedge.OpenUnits(ctx)
		if err != nil {
			return fmt.Errorf("hedge monitor: %w", err)
		}
		for sym, u := range open {
			if !u.IsZero() {
				at(sym).HedgeUnits = u
			}
		}
	}
	for _, t := range trades {
		s := at(t.Symbol)
		if t.Tag == venue.Tag {
			s.VenueUnits = s.VenueUnits.Add(t.CurrentUnits)
		} else {
			s.UntaggedUnits = s.UntaggedUnits.Add(t.CurrentUnits)
		}
	}
	var mismatched []HedgeSymbol
	for _, s := range bySymbol {
		// The venue holds the A-book and the hedge book under one tag.
		s.Mismatch = !s.DeskUnits.Add(s.HedgeUnits).Equal(s.VenueUnits)
		book.Symbols = append(book.Symbols, *s)
		if s.Mismatch {
			mismatched = append(mismatched, *s)
		}
	}
	slices.SortFunc(book.Symbols, func(a, b HedgeSymbol) int { return strings.Compare(a.Symbol, b.Symbol) })
	h.last.Store(book)

	low := !h.cfg.MarginWarn.IsZero() && sum.MarginCloseoutPercent.GreaterThanOrEqual(h.cfg.MarginWarn)
	poor := h.cfg.MinNAV.IsPositive() && sum.NAV.LessThan(h.cfg.MinNAV)
	if low || poor {
		msg := fmt.Sprintf("The venue account's margin closeout level is %s%% (warning at %s%%; the venue closes out at 100%%) and its NAV %s %s. Add funds at the venue or reduce the A-book before the venue closes trades itself.",
			sum.MarginCloseoutPercent.Mul(decimal.NewFromInt(100)).StringFixed(1), h.cfg.MarginWarn.Mul(decimal.NewFromInt(100)).StringFixed(1), sum.NAV.StringFixed(2), sum.Currency)
		if err := h.cfg.Alerts.Raise(ctx, AlertMarginLow, alert.Critical, msg, book); err != nil {
			return err
		}
	} else if err := h.cfg.Alerts.Resolve(ctx, AlertMarginLow); err != nil {
		return err
	}
	if len(mismatched) > 0 {
		slices.SortFunc(mismatched, func(a, b HedgeSymbol) int { return strings.Compare(a.Symbol, b.Symbol) })
		msg := fmt.Sprintf("The desk's EXTERNAL positions and hedge book and the venue's fxdesk trades differ on %d symbol(s), first %s: desk %s units (A-book %s, hedge book %s), venue %s. The execution reconciler repairs what it can match by tag; a difference that stays needs a dealer.",
			len(mismatched), mismatched[0].Symbol, mismatched[0].DeskUnits.Add(mismatched[0].HedgeUnits), mismatched[0].DeskUnits, mismatched[0].HedgeUnits, mismatched[0].VenueUnits)
		if err := h.cfg.Alerts.Raise(ctx, AlertExposureMismatch, alert.Warning, msg, map[string]any{"symbols": mismatched}); err != nil {
			return err
		}
	} else if err := h.cfg.Alerts.Resolve(ctx, AlertExposureMismatch); err != nil {
		return err
	}
	h.cfg.Log.InfoContext(ctx, "hedge monitor ran", slog.String("nav", sum.NAV.String()), slog.String("margin_closeout", sum.MarginCloseoutPercent.String()),
		slog.Int("symbols", len(book.Symbols)), slog.Int("mismatched", len(mismatched)))
	return nil
}
