package api

import (
	"context"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"slices"
	"strings"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/book"
	"fxdesk/internal/desk"
	"fxdesk/internal/execution"
	"fxdesk/internal/fx"
	"fxdesk/internal/hedge"
	"fxdesk/internal/relay"
	"fxdesk/internal/risk"
	"fxdesk/internal/schedule"
	"fxdesk/internal/trading"
	"fxdesk/internal/venue"
)

// report is the operator's one-glance view: the desk status (role, lease, both arbiters, mirror)
// plus the price feed, the scheduled jobs and the open alerts. /api/admin/fx/desk serves it as
// JSON and /admin/status as a page.
type report struct {
	desk.Status
	Feed *feedView `json:"feed"` // nil where no tick engine runs
	// Prices is each price source's health and the symbols not on their primary; nil where no
	// tick engine runs.
	Prices *pricesView         `json:"prices,omitempty"`
	Jobs   []schedule.JobState `json:"jobs"` // nil where no scheduler runs
	Risk   *riskView           `json:"risk"` // nil where no risk engine runs
	// Commits is the group commit of desk-priced fills and closes; nil where no risk engine
	// runs (only the holder fills and closes at its prices).
	Commits *book.CommitStats `json:"commits"`
	// Book is the dealer's view: per symbol, what the desk carries itself (B-book) and what is
	// hedged at the venue (A-book), the venue account and the orders still SENDING.
	Book   *bookView     `json:"book"`
	Alerts []alert.Alert `json:"alerts"`
	// AlertsError says why alerts could not be read (the database is down, for instance).
	AlertsError string `json:"alertsError,omitempty"`
	// Audit is the audit log's latest entries, on the status page only (GET
	// /api/admin/fx/audit serves the log as JSON); AuditError says why it could not be read.
	Audit      []audit.Entry `json:"-"`
	AuditError string        `json:"-"`
	// Relay is the host platform's feed: each consumer's position and lag, the open dead
	// letters; RelayError says why it could not be read.
	Relay      *relay.Status `json:"relay"`
	RelayError string        `json:"relayError,omitempty"`
	// PnL is the dealer's P&L today, on the status page only (GET /api/admin/fx/pnl serves it
	// as JSON, for any range).
	PnL *pnlDay `json:"-"`
	// EOD is the last frozen day and whether the end of day reconciles, on the status page only
	// (GET /api/admin/fx/eod serves the day's report).
	EOD *eodLine `json:"-"`
	// Signed is who reads the status page: their user, role and what the role may do, so the
	// page shows the actions the role holds and nothing it would be refused.
	Signed *signedIn `json:"-"`
	// Money is the money requests awaiting a second finance user, on the status page of a role
	// that may approve them only (nil for every other role).
	Money *moneyPanel `json:"-"`
}

// moneyPanel is the pending money requests as the status page lists them.
type moneyPanel struct {
	Pending []trading.MoneyRequest
	Error   string
}

// statusMoneyRequests is how many pending money requests the status page lists.
const statusMoneyRequests = 20

// signedIn is the status page's reader.
type signedIn struct {
	UserID      int64
	Role        auth.Role
	Permissions []auth.Permission
}

func signedInAs(p auth.Principal) *signedIn {
	s := &signedIn{UserID: p.UserID, Role: p.Role}
	for _, perm := range auth.Permissions {
		if p.Can(perm) {
			s.Permissions = append(s.Permissions, perm)
		}
	}
	return s
}

// statusAuditEntries is how many of the audit log's latest entries the status page shows.
const statusAuditEntries = 10

// bookView is the desk's book: B-book risk, A-book hedge, the venue.
type bookView struct {
	Symbols []bookSymbol           `json:"symbols"`
	Venue   *venueView             `json:"venue"` // nil without a venue
	Sending []trading.SendingOrder `json:"sending"`
	// NBPToday is what negative balance protection cost the desk since the last 17:00 New York
	// rollover (the trading day), per account currency; nil when it could not be read.
	NBPToday *nbpToday `json:"nbpToday"`
	// ExposuresAt is when the symbols' B-book and A-book lots were read: now on
	// /api/admin/fx/desk, up to pageExposuresStale old on the status page (pageExposures).
	ExposuresAt time.Time `json:"exposuresAt,omitzero"`
	Error       string    `json:"error,omitempty"`
}

// nbpToday is negative balance protection's cost over the trading day.
type nbpToday struct {
	Since time.Time         `json:"since"`
	Costs []trading.NBPCost `json:"costs"`
}

// bookSymbol is one symbol of the book, in lots. BBookNetLots is the desk's own net position:
// the opposite of its INTERNAL traders' net (the desk holds the other side). ABookLots is the
// traders' EXTERNAL net, which the venue should hold as VenueUnits (from the last hedge check).
type bookSymbol struct {
	Symbol        string  `json:"symbol"`
	BBookNetLots  string  `json:"bBookNetLots"`
	ABookLots     string  `json:"aBookLots"`
	VenueUnits    *string `json:"venueUnits"`
	UntaggedUnits *string `json:"untaggedUnits"`
	Mismatch      bool    `json:"mismatch"`
	// HedgeBookUnits and HedgeBookPositions are the desk's own open hedge positions at the venue
	// (docs/routing.md, «Hedge book»): their signed units and how many.
	HedgeBookUnits     string `json:"hedgeBookUnits"`
	HedgeBookPositions int    `json:"hedgeBookPositions"`
}

// venueView is the venue account as the last hedge check saw it, and the executor now.
type venueView struct {
	Reachable             bool                `json:"reachable"`
	CheckedAt             *time.Time          `json:"checkedAt"`
	Currency              string              `json:"currency,omitempty"`
	NAV                   string              `json:"nav,omitempty"`
	MarginUsed            string              `json:"marginUsed,omitempty"`
	MarginAvailable       string              `json:"marginAvailable,omitempty"`
	MarginCloseoutPercent string              `json:"marginCloseoutPercent,omitempty"`
	Executor              venue.ExecutorStats `json:"executor"`
}

// VenueView is the holder's venue as the dealer's view shows it.
// HedgeBookView is the desk's hedge book as the dealer reads it (*hedge.Book).
type HedgeBookView interface {
	OpenPositions(ctx context.Context) ([]hedge.Position, error)
	SendingOrders(ctx context.Context) ([]hedge.Order, error)
	Net(ctx context.Context) (map[string]decimal.Decimal, error)
}

type VenueView interface {
	// Active is true once this process trades with the venue (it holds the lease).
	Active() bool
	Last() *execution.VenueBook
	Stats() venue.ExecutorStats
}

// exposureReading is one reading of the book's exposures and when it began.
type exposureReading struct {
	rows []trading.SymbolExposure
	at   time.Time
}

// exposuresReader reads the book's exposures for a view: readExposures (now) for
// /api/admin/fx/desk, the process's shared reading for the status page (pageExposures).
type exposuresReader func(ctx context.Context, d Deps) (*exposureReading, error)

// readExposures reads the book's exposures now.
func readExposures(ctx context.Context, d Deps) (*exposureReading, error) {
	at := time.Now()
	rows, err := d.Trading.ABook().Exposures(ctx)
	if err != nil {
		return nil, err
	}
	return &exposureReading{rows: rows, at: at}, nil
}

// The status page's exposures are one aggregate over every open position (~20 ms on a year of
// a broker's book, docs/operations.md «The dealer's book»), and a dealer's browser asks for the
// page every 5 s — a handful of dealers, or a page left open in several tabs, would pay it for
// each. The page reads them through one shared reading per process: a reading at most
// pageExposuresFresh old is shown as it is, one up to pageExposuresStale old is shown while the
// next is read beside the request, and an older one is waited for. A dealer alone, refreshing
// every 5 s, reads them anew each time; the page says when they were read. /api/admin/fx/desk
// reads them on every call: a script that trades and then reads the book sees its trade.
const (
	pageExposuresFresh = time.Second
	pageExposuresStale = 3 * time.Second
)

// pageExposures is exposuresReader through the shared reading in d.
func pageExposures(ctx context.Context, d Deps) (*exposureReading, error) {
	return d.exposures.Get(ctx, time.Now, time.Time{}, func(ctx context.Context, _ time.Time, _ *exposureReading) (*exposureReading, error) {
		return readExposures(ctx, d)
	})
}

func buildBook(ctx context.Context, d Deps, exposures exposuresReader) *bookView {
	b := &bookView{Symbols: []bookSymbol{}, Sending: []trading.SendingOrder{}}
	read, err := exposures(ctx, d)
	if err != nil {
		b.Error = err.Error()
		return b
	}
	exps := read.rows
	b.ExposuresAt = read.at.UTC()
	if b.Sending, err = d.Trading.ABook().SendingOrders(ctx); err != nil {
		b.Error = err.Error()
	}
	if day, err := fx.LastRollover(time.Now()); err != nil {
		b.Error = err.Error()
	} else if costs, err := d.Trading.NBPCostSince(ctx, day.At); err != nil {
		b.Error = err.Error()
	} else {
		b.NBPToday = &nbpToday{Since: day.At.UTC(), Costs: costs}
	}
	var last *execution.VenueBook
	// The venue as this process trades with it: only the holder checks it and sends to it; a
	// follower's idle executor would read as a venue nobody watches.
	if d.Venue != nil && d.Venue.Active() {
		last = d.Venue.Last()
		st := d.Venue.Stats()
		v := &venueView{Reachable: st.Reachable, Executor: st}
		if last != nil {
			at := last.At
			v.CheckedAt, v.Currency, v.NAV, v.MarginUsed, v.MarginAvailable = &at, last.Currency, last.NAV.String(), last.MarginUsed.String(), last.MarginAvailable.String()
			v.MarginCloseoutPercent = last.MarginCloseoutPercent.String()
		}
		b.Venue = v
	}
	hedged := map[string]execution.HedgeSymbol{}
	if last != nil {
		for _, h := range last.Symbols {
			hedged[h.Symbol] = h
		}
	}
	// The hedge book from the database, so every process shows it.
	type hedgeNet struct {
		units decimal.Decimal
		n     int
	}
	hedgeBook := map[string]*hedgeNet{}
	if d.Hedge != nil {
		ps, err := d.Hedge.OpenPositions(ctx)
		if err != nil {
			b.Error = err.Error()
		}
		for _, p := range ps {
			h := hedgeBook[p.Symbol]
			if h == nil {
				h = &hedgeNet{}
				hedgeBook[p.Symbol] = h
			}
			h.units, h.n = h.units.Add(p.Units), h.n+1
		}
	}
	rows := map[string]*bookSymbol{}
	row := func(sym string) *bookSymbol {
		if r, ok := rows[sym]; ok {
			return r
		}
		r := &bookSymbol{Symbol: sym, BBookNetLots: "0", ABookLots: "0", HedgeBookUnits: "0"}
		rows[sym] = r
		return r
	}
	for _, e := range exps {
		r := row(e.Symbol)
		r.BBookNetLots, r.ABookLots = e.InternalLots.Neg().String(), e.ExternalLots.String()
	}
	for _, h := range hedged {
		r := row(h.Symbol)
		vu, uu := h.VenueUnits.String(), h.UntaggedUnits.String()
		r.VenueUnits, r.UntaggedUnits, r.Mismatch = &vu, &uu, h.Mismatch
	}
	for sym, h := range hedgeBook {
		r := row(sym)
		r.HedgeBookUnits, r.HedgeBookPositions = h.units.String(), h.n
	}
	for _, r := range rows {
		b.Symbols = append(b.Symbols, *r)
	}
	slices.SortFunc(b.Symbols, func(x, y bookSymbol) int { return strings.Compare(x.Symbol, y.Symbol) })
	return b
}

// riskView is the holder's risk engine at a glance.
type riskView struct {
	Loaded         bool   `json:"loaded"`
	Positions      int    `json:"positions"`
	Orders         int    `json:"orders"`
	Accounts       int    `json:"accounts"`
	Queued         int    `json:"queued"`
	TicksEvaluated uint64 `json:"ticksEvaluated"`
	TicksDropped   uint64 `json:"ticksDroppedAtGate"`
	ClosesQueued   uint64 `json:"closesQueued"`
	FillsQueued    uint64 `json:"fillsQueued"`
	WorkDropped    uint64 `json:"workDroppedAtGate"`
	ExecutorErrors uint64 `json:"executorErrors"`
	StopOuts       uint64 `json:"stopOuts"`
	StopOutSkips   uint64 `json:"stopOutSkips"`  // positions stop-out passed over (market closed, halted)
	MarketRefused  uint64 `json:"marketRefused"` // closes and fills refused for market state
	AlreadyClosed  uint64 `json:"alreadyClosed"` // closes whose position another close got to first
	MarginCalls    uint64 `json:"marginCalls"`
}

type feedView struct {
	Connected      bool       `json:"connected"`
	ConnectedSince *time.Time `json:"connectedSince,omitempty"`
	Connects       uint64     `json:"connects"`
	LastError      string     `json:"lastError,omitempty"`
	Wanted         int        `json:"wanted"`
	Quoting        int        `json:"quoting"`
	Halted         int        `json:"halted"`
	Closed         int        `json:"closed"`
	LastTickAgeMs  *int64     `json:"lastTickAgeMs"`
	Accepted       uint64     `json:"accepted"`
	Rejected       uint64     `json:"rejected"`
}

func riskStats(d Deps) (risk.Stats, bool) {
	if d.Risk == nil {
		return risk.Stats{}, false
	}
	return d.Risk()
}

func buildReport(ctx context.Context, d Deps, exposures exposuresReader) report {
	r := report{Status: d.Desk.Status(ctx), Alerts: []alert.Alert{}}
	if e := d.Quotes.Engine(); e != nil {
		s := e.Status()
		f := &feedView{
			Connected: s.Connected, Connects: s.Connects, LastError: s.LastError, Wanted: s.Wanted,
			Quoting: s.Quoting, Halted: s.Halted, Closed: s.Closed, Accepted: s.Accepted,
			Rejected: s.Rejected.Malformed + s.Rejected.Undated + s.Rejected.NonPositive + s.Rejected.Crossed + s.Rejected.UnknownPair,
		}
		if s.Connected {
			t := s.ConnectedSince.UTC()
			f.ConnectedSince = &t
		}
		if !s.LastTickAt.IsZero() {
			age := s.LastTickAge.Milliseconds()
			f.LastTickAgeMs = &age
		}
		r.Feed = f
	}
	if d.PriceSources != nil {
		if e := d.PriceSources.Engine(); e != nil {
			r.Prices = buildPrices(e, d.PriceSources.Controls(), false)
		}
	}
	if d.Jobs != nil {
		r.Jobs = d.Jobs()
	}
	if s, ok := riskStats(d); ok {
		r.Risk = &riskView{
			Loaded: s.Loaded, Positions: s.Positions, Orders: s.Orders, Accounts: s.Accounts, Queued: s.Queued,
			TicksEvaluated: s.TicksEvaluated, TicksDropped: s.TicksDropped, ClosesQueued: s.ClosesQueued,
			FillsQueued: s.FillsQueued, WorkDropped: s.WorkDropped, ExecutorErrors: s.ExecutorErrors,
			StopOuts: s.StopOuts, StopOutSkips: s.StopOutSkips, MarketRefused: s.MarketRefused, AlreadyClosed: s.AlreadyClosed,
			MarginCalls: s.MarginCalls,
		}
		c := d.Trading.CommitStats()
		r.Commits = &c
	}
	// The alerts first, each read with its own bound: a slow book must not leave the alerts
	// unread just when the database is slow.
	actx, cancel := context.WithTimeout(ctx, time.Second)
	alerts, err := d.Alerts.List(actx, alert.Filter{Statuses: []alert.Status{alert.Open, alert.Acknowledged}})
	cancel()
	if err != nil {
		r.AlertsError = err.Error()
	} else {
		r.Alerts = alerts
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	if st, err := relay.ReadStatus(rctx, d.DB); err != nil {
		r.RelayError = err.Error()
	} else {
		r.Relay = &st
	}
	cancel()
	bctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r.Book = buildBook(bctx, d, exposures)
	return r
}

// handleDesk reports the process's role and why, the lease as both arbiters see it, the feed,
// the mirror, the jobs and the open alerts.
func handleDesk(d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, buildReport(r.Context(), d, readExposures))
	}
}

//go:embed status.html
var statusFS embed.FS

var statusPage = template.Must(template.New("status.html").Funcs(template.FuncMap{
	"ms": func(ms int64) string {
		return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
	},
	"ago": func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return time.Since(*t).Round(time.Second).String() + " ago"
	},
	"in": func(t *time.Time) string {
		if t == nil {
			return "—"
		}
		return "in " + time.Until(*t).Round(time.Second).String()
	},
}).ParseFS(statusFS, "status.html"))

// handleStatusPage renders the report as a small self-refreshing page: no scripts, no external
// assets, readable in any browser.
func handleStatusPage(log *slog.Logger, d Deps) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", pageCSP)
		// The page's parts read apart, at once: the book's exposures, the audit log and the P&L
		// of the day each cost a statement or more over large tables, and the page waits for the
		// slowest rather than for their sum.
		var (
			rep       report
			entries   []audit.Entry
			auditErr  error
			pnlOfDay  *pnlDay
			sections  sync.WaitGroup
			ctx, when = r.Context(), time.Now()
		)
		sections.Go(func() { rep = buildReport(ctx, d, pageExposures) })
		sections.Go(func() {
			actx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			entries, auditErr = audit.List(actx, d.DB, audit.Filter{Limit: statusAuditEntries})
		})
		sections.Go(func() { pnlOfDay = buildPnLDay(ctx, d, when) })
		sections.Wait()
		rep.Audit, rep.PnL = entries, pnlOfDay
		if auditErr != nil {
			rep.AuditError = auditErr.Error()
		}
		rep.EOD = buildEODLine(r.Context(), d.DB, rep.Alerts, rep.AlertsError)
		p := principal(r.Context())
		rep.Signed = signedInAs(p)
		if p.Can(auth.PermMoney) {
			mctx, cancel := context.WithTimeout(r.Context(), time.Second)
			pending, err := d.Trading.Finance().Requests(mctx, trading.MoneyRequestFilter{State: fx.MoneyRequestPending, Limit: statusMoneyRequests})
			cancel()
			rep.Money = &moneyPanel{Pending: pending}
			if err != nil {
				rep.Money.Error = err.Error()
			}
		}
		if err := statusPage.Execute(w, rep); err != nil {
			log.WarnContext(r.Context(), "status page not rendered", slog.Any("err", err))
		}
	}
}
