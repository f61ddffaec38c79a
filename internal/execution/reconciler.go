package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/book"
	"fxdesk/internal/fx"
	"fxdesk/internal/gate"
	"fxdesk/internal/hedge"
	"fxdesk/internal/risk"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// Gate admits or drops lease-guarded work (*gate.Gate).
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
}

// Closer closes a venue trade through the executor (*venue.Sender).
type Closer interface {
	CloseTrade(ctx context.Context, tradeID string, units *decimal.Decimal, trigger time.Time) (venue.Outcome, error)
}

// Alerts is the alert inbox (*alert.Inbox).
type Alerts interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// Alert codes the venue jobs raise.
const (
	AlertUntaggedTrade    = "venue-untagged-trade"
	AlertMarginLow        = "venue-margin-low"
	AlertExposureMismatch = "venue-exposure-mismatch"
)

// ReconcilerConfig builds a Reconciler.
type ReconcilerConfig struct {
	Venue  venue.API      // reads: summary, open trades, lookups
	Closer Closer         // orphan closes, through the executor
	Desk   *trading.ABook // the desk's external book and its bookings
	// Hedge is the desk's hedge book; nil: none (its trades are then reported, never closed).
	Hedge   *hedge.Book
	Gate    Gate
	Alerts  Alerts
	Account string // the venue account id (the cursor's key)
	Plan    Config
	// Now, when set, replaces the database clock that SENDING orders are aged on (tests).
	Now func() time.Time
	Log *slog.Logger
}

// Reconciler is runFxExecutionReconciler: it gathers the venue's state and the desk's, asks Plan
// what to do, and does it. It runs on the lease holder only (each run passes the gate).
type Reconciler struct{ cfg ReconcilerConfig }

// NewReconciler checks cfg.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	switch {
	case cfg.Venue == nil || cfg.Closer == nil:
		return nil, errors.New("execution reconciler: a venue is required")
	case cfg.Desk == nil || cfg.Gate == nil || cfg.Alerts == nil:
		return nil, errors.New("execution reconciler: the desk, the gate and the alert inbox are required")
	case cfg.Account == "":
		return nil, errors.New("execution reconciler: the venue account id is required")
	case cfg.Plan.NotSentAfter <= 0:
		return nil, fmt.Errorf("execution reconciler: NotSentAfter must be positive, got %s", cfg.Plan.NotSentAfter)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{cfg: cfg}, nil
}

// Result counts what one run did, by action kind, and the actions that failed.
type Result struct {
	Reason  string             `json:"reason"`
	Planned map[ActionKind]int `json:"planned"`
	Failed  int                `json:"failed"`
}

// Reconcile reconciles once; reason says why (scheduled, boot, lease_restored). A run dropped at the
// gate returns gate.ErrNotHolder and does nothing.
func (r *Reconciler) Reconcile(ctx context.Context, reason string) (Result, error) {
	res := Result{Reason: reason, Planned: map[ActionKind]int{}}
	if err := r.cfg.Gate.Admit(ctx, gate.ExecutionReconciler, slog.String("reason", reason)); err != nil {
		return res, err
	}
	v, d, now, err := r.gather(ctx)
	if err != nil {
		return res, err
	}
	if r.cfg.Now != nil {
		now = r.cfg.Now()
	}
	if v.AsOf < d.AppliedTransactionID {
		r.cfg.Log.WarnContext(ctx, "venue snapshot older than the last venue transaction the desk applied; nothing planned from it",
			slog.Int64("venue_as_of", v.AsOf), slog.Int64("desk_applied", d.AppliedTransactionID),
			slog.String("hint", "a lagging venue read repairs itself next run; a venue account whose history restarted (a new simulator) needs a dealer"))
	}
	actions := Plan(v, d, now, r.cfg.Plan)
	for _, a := range actions {
		if r.busy(a) {
			// Its own send is booking it right now; what is left, the next run plans.
			res.Planned["left_to_its_send"]++
			continue
		}
		res.Planned[a.Kind]++
		err := r.do(ctx, a, v)
		if booked(err) {
			// Booked by its own send between this run's read and the action: a race the plan
			// cannot see, not a failure. What is left, the next run plans.
			r.cfg.Log.InfoContext(ctx, "booked meanwhile by its own send; nothing to do", slog.String("action", string(a.Kind)),
				slog.Int64("order_id", a.OrderID), slog.Int64("position_id", a.PositionID), slog.String("trade_id", a.TradeID))
			res.Planned["left_to_its_send"]++
			continue
		}
		if err != nil {
			res.Failed++
			r.cfg.Log.ErrorContext(ctx, "reconciler action failed; the next run plans again from state",
				slog.String("action", string(a.Kind)), slog.Int64("order_id", a.OrderID), slog.Int64("position_id", a.PositionID),
				slog.String("trade_id", a.TradeID), slog.Any("err", err))
		}
	}
	attrs := []any{slog.String("reason", reason), slog.Int("actions", len(actions)), slog.Int("failed", res.Failed),
		slog.Int("venue_open_trades", len(v.OpenTrades)), slog.Int("desk_linked_positions", len(d.Positions)), slog.Int64("venue_as_of", v.AsOf)}
	for k, n := range res.Planned {
		attrs = append(attrs, slog.Int(string(k), n))
	}
	r.cfg.Log.InfoContext(ctx, "execution reconciler ran", attrs...)
	if r.cfg.Hedge != nil {
		if err := r.cfg.Hedge.CheckUnknown(ctx); err != nil {
			r.cfg.Log.ErrorContext(ctx, "could not check the hedge book's unknown outcomes", slog.Any("err", err))
		}
	}
	return res, nil
}

// busy is whether a's order or position is being sent or booked by its own send right now.
func (r *Reconciler) busy(a Action) bool {
	if a.Kind.Hedge() {
		return r.cfg.Hedge != nil && r.cfg.Hedge.Busy(a.OrderID, a.PositionID)
	}
	return r.cfg.Desk.VenueBusy(a.OrderID, a.PositionID)
}

// gather reads both states: the venue's snapshot first (its AsOf), then the desk's book, then
// the targeted lookups the desk's rows call for.
func (r *Reconciler) gather(ctx context.Context) (VenueState, DeskState, time.Time, error) {
	// The desk's cursor first: a snapshot is stale only if it predates what the desk had applied
	// before the snapshot was taken, so fills the desk books while this run gathers do not make
	// it skip the run.
	cursor, now, err := r.cfg.Desk.VenueCursor(ctx, r.cfg.Account)
	if err != nil {
		return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: %w", err)
	}
	sum, err := r.cfg.Venue.Summary(ctx)
	if err != nil {
		return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: venue summary: %w", err)
	}
	trades, err := r.cfg.Venue.OpenTrades(ctx)
	if err != nil {
		return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: venue open trades: %w", err)
	}
	v := VenueState{AsOf: sum.LastTransactionID, OpenTrades: trades, Trades: map[string]venue.Trade{}, ByClientID: map[string]ClientLookup{}}
	var named, namedHedge []int64
	open := map[string]venue.Trade{}
	carried := map[string]bool{} // client ids an open tagged trade already carries
	for _, t := range trades {
		open[t.ID] = t
		if t.Tag == venue.Tag {
			carried[t.ClientID] = true
			if id, err := strconv.ParseInt(t.ClientID, 10, 64); err == nil && id > 0 {
				named = append(named, id)
			} else if id, ok := hedge.OrderOfClientID(t.ClientID); ok {
				namedHedge = append(namedHedge, id)
			}
		}
	}
	positions, orders, err := r.cfg.Desk.ExternalBook(ctx, named)
	if err != nil {
		return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: desk book: %w", err)
	}
	sizes, err := r.cfg.Desk.ContractSizes(ctx)
	if err != nil {
		return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: contract sizes: %w", err)
	}
	d := DeskState{Orders: map[string]DeskOrder{}, ContractSize: sizes, AppliedTransactionID: cursor}
	wanted := map[int64]bool{} // closing fills of linked trades the desk has not booked
	for _, p := range positions {
		d.Positions = append(d.Positions, DeskPosition{PositionID: p.PositionID, OrderID: p.OrderID, AccountID: p.AccountID,
			Symbol: p.Symbol, Side: p.Side, Volume: p.Volume, TradeID: p.TradeID, Booked: p.Booked})
		t, isOpen := open[p.TradeID]
		if isOpen && t.CurrentUnits.Abs().Equal(p.Volume.Mul(p.ContractSize)) {
			continue
		}
		full, found, err := r.cfg.Venue.TradeByID(ctx, p.TradeID)
		if err != nil {
			return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: trade %s: %w", p.TradeID, err)
		}
		if found {
			v.Trades[p.TradeID] = full
			booked := map[int64]bool{}
			for _, id := range p.Booked {
				booked[id] = true
			}
			for _, id := range full.ClosingTransactionIDs {
				if !booked[id] {
					wanted[id] = true
				}
			}
		}
	}
	if v.Fills, err = r.fills(ctx, wanted); err != nil {
		return VenueState{}, DeskState{}, time.Time{}, err
	}
	if err := r.gatherHedge(ctx, &v, &d, open, carried, namedHedge); err != nil {
		return VenueState{}, DeskState{}, time.Time{}, err
	}
	for _, o := range orders {
		cid := trading.ClientID(o.OrderID)
		d.Orders[cid] = DeskOrder{OrderID: o.OrderID, AccountID: o.AccountID, ClientID: cid, Symbol: o.Symbol, Side: o.Side, Volume: o.Volume,
			Status: o.Status, SentAt: o.SentAt, PositionID: o.PositionID, PositionOpen: o.PositionOpen, TradeID: o.TradeID,
			LastVenueTx: o.LastVenueTx}
		// Looked up by client id only where that can tell anything, and never one its own send
		// is booking. An order an open trade already explains is adopted from the listing, which
		// lacks only the venue's order id: its order alone is looked up.
		switch {
		case r.cfg.Desk.VenueBusy(o.OrderID, 0):
			continue
		case carried[cid]:
			if o.PositionID != 0 || (o.Status != fx.OrderSending && o.Status != fx.OrderNotSent) {
				continue
			}
			info, found, err := r.cfg.Venue.OrderByClientID(ctx, cid)
			if err != nil {
				return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: order @%s: %w", cid, err)
			}
			if found {
				v.ByClientID[cid] = ClientLookup{Order: &info}
			}
			continue
		case o.Status != fx.OrderSending:
			continue
		}
		var lk ClientLookup
		if info, found, err := r.cfg.Venue.OrderByClientID(ctx, cid); err != nil {
			return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: order @%s: %w", cid, err)
		} else if found {
			lk.Order = &info
		}
		if t, found, err := r.cfg.Venue.TradeByClientID(ctx, cid); err != nil {
			return VenueState{}, DeskState{}, time.Time{}, fmt.Errorf("reconcile: trade @%s: %w", cid, err)
		} else if found {
			lk.Trade = &t
		}
		v.ByClientID[cid] = lk
	}
	return v, d, now, nil
}

// do carries out one action.
func (r *Reconciler) do(ctx context.Context, a Action, v VenueState) error {
	log := r.cfg.Log.With(slog.String("action", string(a.Kind)), slog.String("trade_id", a.TradeID), slog.String("why", a.Reason))
	switch a.Kind {
	case Adopt, AdoptClosed:
		units := a.Units
		if units == nil {
			return fmt.Errorf("adopt order %d: no units", a.OrderID)
		}
		pos, err := r.cfg.Desk.AdoptVenueTrade(ctx, trading.VenueAdoption{OrderID: a.OrderID, TradeID: a.TradeID, Symbol: a.Symbol,
			Units: *units, Price: a.Price, OpenedAt: a.OpenedAt, VenueOrderID: a.VenueOrderID, TransactionID: a.TransactionID})
		if err != nil {
			return err
		}
		log.InfoContext(ctx, "adopted a venue trade for the desk order that sent it; not reopened", slog.Int64("order_id", a.OrderID), slog.Int64("position_id", pos))
		if a.Kind == AdoptClosed {
			if err := r.cfg.Desk.BookVenueClose(ctx, pos, nil, a.ClosePrice, a.CloseTransactionID); err != nil {
				return err
			}
			log.InfoContext(ctx, "booked the venue's close of the adopted trade", slog.Int64("position_id", pos), slog.String("price", a.ClosePrice.String()))
		}
	case MarkNotSent:
		if err := r.cfg.Desk.EndVenueOrder(ctx, a.OrderID, fx.OrderNotSent, "no trace at the venue by its client id"); err != nil {
			return err
		}
		log.WarnContext(ctx, "order has no trace at the venue; marked NOT_SENT, never re-sent", slog.Int64("order_id", a.OrderID))
	case MarkRejected:
		if err := r.cfg.Desk.EndVenueOrder(ctx, a.OrderID, fx.OrderRejected, a.Reason); err != nil {
			return err
		}
		log.InfoContext(ctx, "the venue cancelled the order; marked REJECTED", slog.Int64("order_id", a.OrderID))
	case CloseOrphan:
		if err := r.cfg.Gate.Admit(ctx, gate.VenueSend, slog.String("op", "close orphan venue trade"), slog.String("trade_id", a.TradeID)); err != nil {
			return err
		}
		// No trigger: a repair is not a tick's close, and its time is not own time.
		out, err := r.cfg.Closer.CloseTrade(ctx, a.TradeID, a.Units, time.Time{})
		if err != nil {
			return err
		}
		if out.Cancelled != nil {
			return fmt.Errorf("the venue cancelled the close of orphan trade %s: %s", a.TradeID, out.Cancelled.Reason)
		}
		log.WarnContext(ctx, "closed a tagged venue trade no open desk position explains", slog.Any("units", a.Units))
	case CloseDeskSide:
		// Its own share, like every BookPartial: if an earlier share of the trade failed, the
		// position stays open for it rather than close at this fill's price.
		vol := a.Volume
		if err := r.cfg.Desk.BookVenueClose(ctx, a.PositionID, &vol, a.Price, a.TransactionID); err != nil {
			return err
		}
		log.InfoContext(ctx, "closed the desk side of a trade the venue closed, at the venue's price", slog.Int64("position_id", a.PositionID), slog.String("price", a.Price.String()))
	case BookPartial:
		vol := a.Volume
		if err := r.cfg.Desk.BookVenueClose(ctx, a.PositionID, &vol, a.Price, a.TransactionID); err != nil {
			return err
		}
		log.InfoContext(ctx, "booked a partial close the venue made and nobody booked", slog.Int64("position_id", a.PositionID), slog.String("volume", vol.String()))
	case AdoptHedge, AdoptHedgeClosed, MarkHedgeNotSent, MarkHedgeRejected, CloseHedgeSide, BookHedgePartial, ResolveHedgeReduce, ReportHedge:
		return r.doHedge(ctx, a, log)
	case AlertUntagged:
		units := ""
		if a.Units != nil {
			units = a.Units.String()
		}
		return r.cfg.Alerts.Raise(ctx, AlertUntaggedTrade, alert.Warning,
			fmt.Sprintf("Venue trade %s (%s, %s units) carries no fxdesk tag: the desk never touches it. Someone traded the desk's venue account by hand, or another system shares it.", a.TradeID, a.Symbol, units),
			map[string]any{"tradeId": a.TradeID, "symbol": a.Symbol, "units": units})
	default:
		return fmt.Errorf("unknown action %q", a.Kind)
	}
	return nil
}

// booked is whether err says the action's booking was made meanwhile by the send it repairs.
func booked(err error) bool {
	return errors.Is(err, book.ErrAlreadyBooked) || errors.Is(err, risk.ErrAlreadyClosed) || errors.Is(err, hedge.ErrAlreadyBooked)
}

// maxFillPages bounds how many pages of transactions one run reads for the fills it wants; what
// is not found by then waits for a later run (Plan books a trade's shares only when it knows
// every one of them).
const maxFillPages = 20

// fills reads the venue transactions named in wanted, from the oldest on.
func (r *Reconciler) fills(ctx context.Context, wanted map[int64]bool) (map[int64]venue.Transaction, error) {
	out := map[int64]venue.Transaction{}
	if len(wanted) == 0 {
		return out, nil
	}
	from := int64(-1)
	for id := range wanted {
		if from < 0 || id < from {
			from = id
		}
	}
	since := from - 1
	for range maxFillPages {
		txs, last, err := r.cfg.Venue.TransactionsSince(ctx, since)
		if err != nil {
			return nil, fmt.Errorf("reconcile: venue transactions since %d: %w", since, err)
		}
		for _, tx := range txs {
			if wanted[tx.ID] {
				out[tx.ID] = tx
			}
			since = max(since, tx.ID)
		}
		// A page is the next transactions by count (venue.API), so an empty one means nothing
		// follows since, even across a gap of ids.
		if len(out) == len(wanted) || len(txs) == 0 || since >= last {
			break
		}
	}
	return out, nil
}
