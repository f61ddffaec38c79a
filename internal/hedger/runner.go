package hedger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/catalog"
	"fxdesk/internal/gate"
	"fxdesk/internal/hedge"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// AlertBreached is raised while a symbol's net exposure is past its limit and the hedger could
// not bring it back (the venue down or refusing, a hedge order's outcome unknown, a minimum
// size too big for the limit), and resolved once every limited symbol is back inside.
const AlertBreached = "exposure-limit-breached"

// Book is the desk's hedge book, as the hedger uses it (*hedge.Book, through cmd/web's adapter).
type Book interface {
	// Open sends the hedger's hedge order of units (signed venue units) on symbol: the order's
	// identity row first, the send under the gate, the fill booked. It returns nil once the hedge
	// position is booked. An error means it is not: venue.ErrOutcomeUnknown (wrapped) when the
	// order may have filled (its row stays SENDING, the reconciler resolves it, the book raises
	// hedge-unknown-outcome); any other error when nothing opened (not sent, refused, the gate).
	Open(ctx context.Context, symbol string, units decimal.Decimal) error
	// Close closes the hedger's open hedge position id, whole, at the venue, and books it.
	// Errors as Open's; the position stays open on any of them.
	Close(ctx context.Context, positionID int64) error
	// State reads the hedge book per symbol.
	State(ctx context.Context) (map[string]BookState, error)
}

// BookState is one symbol's hedge book.
type BookState struct {
	// Units is the signed venue units of every open hedge position, the hedger's and the
	// routing rules' (HEDGE n%).
	Units decimal.Decimal
	// Positions are the hedger's own open positions.
	Positions []HedgePosition
	// Unresolved counts the hedge orders still SENDING, of every kind.
	Unresolved int
}

// Desk is the desk's B-book as the hedger reads it (*trading.ABook).
type Desk interface {
	// Exposures sums the traders' open positions per symbol, INTERNAL (B-book) and EXTERNAL apart.
	Exposures(ctx context.Context) ([]trading.SymbolExposure, error)
	// ContractSizes maps every instrument to its venue units per lot.
	ContractSizes(ctx context.Context) (map[string]decimal.Decimal, error)
}

// Gate admits or drops lease-guarded work (*gate.Gate).
type Gate interface {
	Admit(ctx context.Context, w gate.Work, attrs ...slog.Attr) error
}

// Alerts is the alert inbox (*alert.Inbox).
type Alerts interface {
	Raise(ctx context.Context, code string, severity alert.Severity, message string, details any) error
	Resolve(ctx context.Context, code string) error
}

// Config builds a Runner.
type Config struct {
	Book   Book
	Desk   Desk
	Terms  func() *catalog.HedgeTerms // *catalog.Settings.HedgeTerms
	Gate   Gate
	Alerts Alerts
	// Every is the slow pass that runs whatever the changes: the safety net for a change nobody
	// reported, a settings change made on another process, a venue that came back.
	Every time.Duration
	// MinGap is the least time from one pass's start to the next pass a change asks for
	// (default 250 ms): the changes of a burst of fills make one pass, so the B-book's
	// aggregate (its cost grows with the open positions) is read a few times a second at most.
	MinGap time.Duration
	// Recheck is how soon a symbol held back by a SENDING hedge order is looked at again
	// (default 1 s): most are a routing rule's hedge in flight, answered in milliseconds.
	Recheck time.Duration
	// Orders counts the hedger's venue orders by kind (open, close) and result (filled,
	// not_filled, unknown); Net is each limited symbol's net exposure in lots after a pass.
	// Both optional (metrics.Metrics.NewHedger).
	Orders *prometheus.CounterVec
	Net    *prometheus.GaugeVec
	// Quoting says whether a symbol's market is quoting now (desk.Quotes.SymbolState ==
	// tick.Quoting); nil: always. A symbol that is not (its session closed, its feed silent) is
	// held: the venue would refuse the hedge, and the desk could not price its traders either.
	Quoting func(symbol string) bool
	// Now is the clock the retry backoff runs on (default time.Now).
	Now func() time.Time
	Log *slog.Logger
}

// Runner is the hedger: see the package documentation. Run it on the lease holder only.
type Runner struct {
	cfg  Config
	wake chan struct{}

	// Pass state, touched by one pass at a time (Run's goroutine, or a test's Pass).
	mu   sync.Mutex
	held map[string]int // consecutive passes a symbol was held back by a SENDING order
	// backoff spaces a symbol's sends after a failed one (hedge.Backoff: a venue outage would
	// otherwise write a NOT_SENT hedge order for every fill the traders make); failed is the
	// failed decision, breached, for the alert while it waits.
	backoff *hedge.Backoff[string]
	failed  map[string]Decision
	raised  bool            // AlertBreached may be open (true at start: a predecessor's row)
	metered map[string]bool // symbols with a net exposure gauge
}

// New checks cfg.
func New(cfg Config) (*Runner, error) {
	switch {
	case cfg.Book == nil || cfg.Desk == nil || cfg.Terms == nil:
		return nil, errors.New("hedger: the hedge book, the desk and the terms are required")
	case cfg.Gate == nil || cfg.Alerts == nil:
		return nil, errors.New("hedger: the gate and the alert inbox are required")
	case cfg.Every <= 0:
		return nil, fmt.Errorf("hedger: the pass interval must be positive, got %s", cfg.Every)
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Second
	}
	if cfg.MinGap <= 0 {
		cfg.MinGap = 250 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Runner{cfg: cfg, wake: make(chan struct{}, 1), held: map[string]int{}, backoff: hedge.NewBackoff[string](), failed: map[string]Decision{}, raised: true,
		metered: map[string]bool{}}, nil
}

// Notify says the B-book's exposure may have changed (a fill or a close committed). It never
// blocks: changes arriving during a pass make one more pass after it.
func (r *Runner) Notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run passes at once, on every Notify, every Every, and again after a pass that sent an order
// (which changed the hedge book), until ctx ends. A pass the gate drops is logged and counted
// there; any other failure is logged, and the next pass decides again from state.
func (r *Runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Every)
	defer t.Stop()
	recheck := time.NewTimer(0)
	recheck.Stop()
	defer recheck.Stop()
	reason := "boot"
	for {
		started := time.Now()
		res, err := r.Pass(ctx, reason)
		if err != nil && !errors.Is(err, gate.ErrNotHolder) && ctx.Err() == nil {
			r.cfg.Log.ErrorContext(ctx, "hedger pass failed; the next pass decides again from state", slog.String("reason", reason), slog.Any("err", err))
		}
		if !res.Again.IsZero() {
			recheck.Reset(max(res.Again.Sub(r.cfg.Now()), 0))
		}
		if res.Done > 0 {
			reason = "after_order"
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
			reason = "change"
			if wait := r.cfg.MinGap - time.Since(started); wait > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(wait):
				}
				select { // the changes of the wait are in the pass that follows
				case <-r.wake:
				default:
				}
			}
		case <-t.C:
			reason = "scheduled"
		case <-recheck.C:
			reason = "recheck"
		}
	}
}

// PassResult counts what one pass did.
type PassResult struct {
	Decisions []Decision
	Done      int // orders filled and booked
	Failed    int // orders not done (refused, not sent, unknown outcome)
	Held      int // symbols held back by a SENDING hedge order, or waiting out a failure's backoff
	Breached  []string
	// Again is when a held symbol should be looked at again (zero: none is held).
	Again time.Time
}

// Pass decides every limited symbol once and sends the orders, each symbol's on its own: one
// symbol's failure does not stop the others. reason says why it runs, for the log.
func (r *Runner) Pass(ctx context.Context, reason string) (PassResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var res PassResult
	if err := r.cfg.Gate.Admit(ctx, gate.Hedger, slog.String("reason", reason)); err != nil {
		return res, err
	}
	terms := r.cfg.Terms()
	if len(terms.Limits) == 0 && !r.raised && len(r.metered) == 0 {
		return res, nil
	}
	states, err := r.read(ctx, terms)
	if err != nil {
		return res, err
	}
	now := r.cfg.Now()
	again := func(at time.Time) {
		if res.Again.IsZero() || at.Before(res.Again) {
			res.Again = at
		}
	}
	breaches := map[string]Decision{}
	type send struct {
		d            Decision
		contractSize decimal.Decimal
		err          error
	}
	var sends []send
	for _, s := range states {
		limit := terms.Limits[s.Symbol]
		d := Decide(s, Limit{Max: &limit, Band: terms.Band, Min: terms.Min})
		res.Decisions = append(res.Decisions, d)
		r.meter(s.Symbol, d.Net, s.ContractSize)
		if s.Unresolved > 0 {
			res.Held++
			r.held[s.Symbol]++
			again(now.Add(r.cfg.Recheck))
			// A rule's hedge in flight holds a symbol for milliseconds; one still SENDING at the
			// next look, or one of the hedger's that failed, is an unknown outcome, and then a
			// breach is one.
			if d.Breached && (r.held[s.Symbol] > 1 || r.backoff.Failed(s.Symbol)) {
				breaches[s.Symbol] = d
			}
			continue
		}
		delete(r.held, s.Symbol)
		if d.Kind != Nothing && r.cfg.Quoting != nil && !r.cfg.Quoting(s.Symbol) {
			// Looked at again on the next change or scheduled pass: a market closed for the
			// weekend is not read every second.
			res.Held++
			if d.Net.Abs().GreaterThan(d.LimitUnits) {
				d.Breached, d.Reason = true, "its market is not quoting: the hedge waits for it"
				breaches[s.Symbol] = d
			}
			continue
		}
		if until, waiting := r.backoff.Waiting(s.Symbol, now); waiting && d.Kind != Nothing {
			res.Held++
			again(until)
			if d.Net.Abs().GreaterThan(d.LimitUnits) {
				last := r.failed[s.Symbol]
				last.Net, last.LimitUnits = d.Net, d.LimitUnits
				breaches[s.Symbol] = last
			}
			continue
		}
		if d.Kind == Nothing {
			r.backoff.Done(s.Symbol)
			delete(r.failed, s.Symbol)
			if d.Breached {
				r.cfg.Log.WarnContext(ctx, "net exposure past its limit and no hedge can bring it back", decisionAttrs(d)...)
				breaches[s.Symbol] = d
			}
			continue
		}
		sends = append(sends, send{d: d, contractSize: s.ContractSize})
	}
	// The orders go out together, each symbol's on its own: a slow or failing venue answer on
	// one does not hold the others.
	var wg sync.WaitGroup
	for i := range sends {
		wg.Go(func() { sends[i].err = r.send(ctx, sends[i].d) })
	}
	wg.Wait()
	for _, o := range sends {
		d := o.d
		if o.err == nil {
			res.Done++
			r.backoff.Done(d.Symbol)
			delete(r.failed, d.Symbol)
			r.meter(d.Symbol, d.NetAfter, o.contractSize)
			continue
		}
		res.Failed++
		if errors.Is(o.err, gate.ErrNotHolder) {
			continue // not the venue's failure: no backoff, no breach raised by a process that may not hold the desk
		}
		d.Reason = "the hedge was not done: " + o.err.Error()
		r.failed[d.Symbol] = d
		again(r.backoff.Fail(d.Symbol, now, r.cfg.Every))
		if d.Net.Abs().GreaterThan(d.LimitUnits) {
			d.Breached = true
			breaches[d.Symbol] = d
		}
	}
	for sym := range r.held {
		if _, limited := terms.Limits[sym]; !limited {
			delete(r.held, sym)
		}
	}
	r.backoff.Keep(func(sym string) bool {
		_, limited := terms.Limits[sym]
		return limited
	})
	for sym := range r.failed {
		if _, limited := terms.Limits[sym]; !limited {
			delete(r.failed, sym)
		}
	}
	for sym := range r.metered {
		if _, limited := terms.Limits[sym]; !limited && r.cfg.Net != nil {
			r.cfg.Net.DeleteLabelValues(sym)
			delete(r.metered, sym)
		}
	}
	for sym := range breaches {
		res.Breached = append(res.Breached, sym)
	}
	slices.Sort(res.Breached)
	r.alert(ctx, breaches, res.Breached)
	r.cfg.Log.DebugContext(ctx, "hedger pass", slog.String("reason", reason), slog.Int("symbols", len(states)),
		slog.Int("done", res.Done), slog.Int("failed", res.Failed), slog.Int("held", res.Held), slog.Any("breached", res.Breached))
	return res, nil
}

// read gathers every limited symbol's state: the B-book's exposure, the hedge book, the
// contract size. The B-book is read after the hedge book, so a hedge booked between the two
// reads cannot be counted against an exposure that predates it.
func (r *Runner) read(ctx context.Context, terms *catalog.HedgeTerms) ([]State, error) {
	books, err := r.cfg.Book.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("hedger: read the hedge book: %w", err)
	}
	exposures, err := r.cfg.Desk.Exposures(ctx)
	if err != nil {
		return nil, fmt.Errorf("hedger: read the B-book's exposure: %w", err)
	}
	sizes, err := r.cfg.Desk.ContractSizes(ctx)
	if err != nil {
		return nil, fmt.Errorf("hedger: read the contract sizes: %w", err)
	}
	clients := make(map[string]decimal.Decimal, len(exposures))
	for _, e := range exposures {
		clients[e.Symbol] = e.InternalLots
	}
	symbols := make([]string, 0, len(terms.Limits))
	for sym := range terms.Limits {
		symbols = append(symbols, sym)
	}
	slices.Sort(symbols)
	out := make([]State, 0, len(symbols))
	for _, sym := range symbols {
		b := books[sym]
		out = append(out, State{Symbol: sym, DeskLots: clients[sym].Neg(), HedgeUnits: b.Units, Positions: b.Positions,
			Unresolved: b.Unresolved, ContractSize: sizes[sym]})
	}
	return out, nil
}

// send does one decision's order and logs what happened.
func (r *Runner) send(ctx context.Context, d Decision) error {
	var err error
	switch d.Kind {
	case Open:
		err = r.cfg.Book.Open(ctx, d.Symbol, d.Units)
	case Close:
		err = r.cfg.Book.Close(ctx, d.PositionID)
	}
	result := "filled"
	switch {
	case err == nil:
		r.cfg.Log.InfoContext(ctx, "hedge done", decisionAttrs(d)...)
	case errors.Is(err, gate.ErrNotHolder):
		// The lease went while the pass ran: the gate logged and counted it; the holder (this
		// process again, or another) decides afresh.
		result = "not_filled"
	case errors.Is(err, venue.ErrOutcomeUnknown):
		result = "unknown"
		r.cfg.Log.ErrorContext(ctx, "hedge outcome unknown; the symbol is not hedged again until the reconciler resolves it",
			append(decisionAttrs(d), slog.Any("err", err))...)
	default:
		result = "not_filled"
		r.cfg.Log.ErrorContext(ctx, "hedge not done; the next pass decides again", append(decisionAttrs(d), slog.Any("err", err))...)
	}
	if r.cfg.Orders != nil {
		r.cfg.Orders.WithLabelValues(string(d.Kind), result).Inc()
	}
	return err
}

// alert raises AlertBreached naming every breached symbol, or resolves it when none is.
func (r *Runner) alert(ctx context.Context, breaches map[string]Decision, symbols []string) {
	if len(symbols) == 0 {
		if r.raised {
			if err := r.cfg.Alerts.Resolve(ctx, AlertBreached); err != nil {
				r.cfg.Log.ErrorContext(ctx, "could not resolve an alert", slog.String("alert", AlertBreached), slog.Any("err", err))
				return
			}
			r.raised = false
		}
		return
	}
	parts := make([]string, 0, len(symbols))
	details := make([]map[string]any, 0, len(symbols))
	for _, sym := range symbols {
		d := breaches[sym]
		parts = append(parts, fmt.Sprintf("%s net %s units, limit %s (%s)", sym, d.Net, d.LimitUnits, d.Reason))
		details = append(details, map[string]any{"symbol": sym, "netUnits": d.Net.String(), "limitUnits": d.LimitUnits.String(), "reason": d.Reason})
	}
	msg := "Net exposure is past its limit and the hedger could not bring it back: " + strings.Join(parts, "; ") +
		". The hedger tries again on every change and every pass; check the venue (GET /api/admin/fx/desk) and the hedge book."
	if err := r.cfg.Alerts.Raise(ctx, AlertBreached, alert.Critical, msg, map[string]any{"symbols": details}); err != nil {
		r.cfg.Log.ErrorContext(ctx, "could not raise an alert", slog.String("alert", AlertBreached), slog.Any("err", err))
		return
	}
	r.raised = true
}

// meter sets a symbol's net exposure gauge, in lots; a pass drops the gauge of a symbol no
// longer limited.
func (r *Runner) meter(symbol string, netUnits, contractSize decimal.Decimal) {
	if r.cfg.Net == nil || !contractSize.IsPositive() {
		return
	}
	r.metered[symbol] = true
	r.cfg.Net.WithLabelValues(symbol).Set(netUnits.Div(contractSize).InexactFloat64())
}

func decisionAttrs(d Decision) []any {
	return []any{slog.String("symbol", d.Symbol), slog.String("kind", string(d.Kind)), slog.String("units", d.Units.String()),
		slog.Int64("position_id", d.PositionID), slog.String("net_units", d.Net.String()), slog.String("net_after_units", d.NetAfter.String()),
		slog.String("limit_units", d.LimitUnits.String()), slog.String("why", d.Reason)}
}
