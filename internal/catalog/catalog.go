package catalog

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
	"fxdesk/internal/tick"
)

// SymbolGroup prices the instruments in it.
type SymbolGroup struct {
	Name               string          `json:"name"`
	MarkupPoints       decimal.Decimal `json:"markupPoints"`
	CommissionPerLot   decimal.Decimal `json:"commissionPerLot"`
	CommissionCurrency string          `json:"commissionCurrency"`
	HedgedMarginRate   decimal.Decimal `json:"hedgedMarginRate"`
}

// Instrument is the domain instrument with the trading terms kept beside it: its leverage cap
// (a column the trading migration adds; at least 1 here) and its symbol group.
type Instrument struct {
	fx.Instrument
	LeverageMax int
	Group       SymbolGroup
}

// AccountGroup caps leverage, sets the margin-call and stop-out levels (percent), routes its
// accounts' orders (Execution), and carries the dealer's controls: whether its new accounts are
// swap-free, negative balance protection, and its own cap on resting orders per account (nil:
// the desk setting). The JSON names are the API's, so an audit row reads like the request.
type AccountGroup struct {
	Name                      string           `json:"name"`
	LeverageMax               int              `json:"leverageMax"`
	MarginCallLevel           decimal.Decimal  `json:"marginCallLevel"`
	StopOutLevel              decimal.Decimal  `json:"stopOutLevel"`
	Execution                 fx.ExecutionMode `json:"executionMode"`
	SwapFreeDefault           bool             `json:"swapFreeDefault"`
	NegativeBalanceProtection bool             `json:"negativeBalanceProtection"`
	MaxPendingOrders          *int             `json:"maxPendingOrders"`
	// PositionMode is how its accounts hold positions (docs/orders.md, «Position modes»).
	PositionMode fx.PositionMode `json:"positionMode"`
}

const accountGroupCols = "`name`, `leverageMax`, `marginCallLevel`, `stopOutLevel`, `executionMode`, `swapFreeDefault`, `negativeBalanceProtection`, `maxPendingOrders`, `positionMode`"

// TermsChange tells the risk engine that account id is now under g's margin terms (a move, or
// an edit of its group): it re-marks the account at the next tick of its symbols.
func (g AccountGroup) TermsChange(id int64) risk.Change {
	return risk.Change{Kind: risk.AccountTermsChanged, Account: risk.Account{ID: id, Group: g.Name, GroupLeverage: g.LeverageMax,
		MarginCallLevel: g.MarginCallLevel.InexactFloat64(), StopOutLevel: g.StopOutLevel.InexactFloat64()}}
}

// RiskTerms is what the risk engine needs of in.
func (in Instrument) RiskTerms() risk.Instrument {
	return risk.NewInstrument(in.Instrument, in.LeverageMax, in.Group.HedgedMarginRate, in.Group.MarkupPoints)
}

func scanAccountGroup(sc store.Scanner) (AccountGroup, error) {
	var g AccountGroup
	err := sc.Scan(&g.Name, &g.LeverageMax, &g.MarginCallLevel, &g.StopOutLevel, &g.Execution, &g.SwapFreeDefault, &g.NegativeBalanceProtection, &g.MaxPendingOrders, &g.PositionMode)
	return g, err
}

// Catalog is an immutable snapshot of instruments and groups: its maps and slices are shared by
// every reader and must never be modified.
type Catalog struct {
	Instruments   map[string]Instrument
	Pairs         map[string]string // base+quote → symbol, for the USD hub
	AccountGroups map[string]AccountGroup
	Currencies    map[string]bool // currencies the hub can convert
	SymbolGroups  map[string]SymbolGroup
	List          []Instrument // every instrument, in symbol order
	// Tradable and TradableList hold the enabled instruments, for the markets routes.
	Tradable     map[string]Instrument
	TradableList []Instrument
	// overrides are the account groups' symbol settings, read by Effective.
	overrides map[overrideKey]Override
	// Routing is each account group's routing rules in the order they are asked (a group
	// without rules routes by its execution mode); RoutingUsesProfile is true when any rule of
	// any group reads the trader profile.
	Routing            map[string][]routing.Rule
	RoutingUsesProfile bool
}

var hundred = decimal.NewFromInt(100)

// AccountGroup is group name's terms; a group nobody defined has the desk's defaults (those of
// a new fx_account_group row: negative balance protection on).
func (c *Catalog) AccountGroup(name string) AccountGroup {
	if g, ok := c.AccountGroups[name]; ok {
		return g
	}
	return defaultAccountGroup(name)
}

// defaultAccountGroup is a group with the schema's defaults (migrations 000003, 000010, 000013).
func defaultAccountGroup(name string) AccountGroup {
	return AccountGroup{Name: name, LeverageMax: 500, MarginCallLevel: hundred, StopOutLevel: decimal.NewFromInt(50), Execution: fx.Internal,
		NegativeBalanceProtection: true, PositionMode: fx.Hedging}
}

// Cache re-reads the catalog at most every maxAge, and at once after an admin change in this
// process (Invalidate). Instruments and groups change rarely; reading them per order would cost a
// round trip for nothing. One process shares one Cache between the trading rules and the admin.
type Cache struct {
	db     *sql.DB
	maxAge time.Duration

	mu     sync.Mutex
	cur    *Catalog
	loaded time.Time
	last   atomic.Pointer[Catalog] // the latest loaded, kept through Invalidate (LastLoaded)
}

// NewCache returns a cache over db that serves a snapshot for at most maxAge.
func NewCache(db *sql.DB, maxAge time.Duration) *Cache {
	return &Cache{db: db, maxAge: maxAge}
}

// Get returns the current snapshot, reading the database when it is older than maxAge. A read
// that fails serves the last good snapshot, if there is one, rather than refuse every order.
func (c *Cache) Get(ctx context.Context) (*Catalog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && time.Since(c.loaded) < c.maxAge {
		return c.cur, nil
	}
	cat, err := Load(ctx, c.db)
	if err != nil {
		if c.cur != nil {
			return c.cur, nil // serve the last good snapshot rather than refuse every order
		}
		return nil, err
	}
	c.cur, c.loaded = cat, time.Now()
	c.last.Store(cat)
	return cat, nil
}

// LastLoaded is the latest catalog loaded, however old; it reads the database only when none
// was ever loaded. It is for a close the risk engine triggers on an EXTERNAL position: on its
// way to the venue it needs only the instrument's contract size, and it must not wait for a
// reload (a database read, with every other close of the burst queued behind its lock) first.
func (c *Cache) LastLoaded(ctx context.Context) (*Catalog, error) {
	if cat := c.last.Load(); cat != nil {
		return cat, nil
	}
	return c.Get(ctx)
}

// Invalidate makes the next Get read the database.
func (c *Cache) Invalidate() {
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
}

// Load reads the catalog from db.
func Load(ctx context.Context, db *sql.DB) (*Catalog, error) {
	all, err := tick.LoadInstruments(ctx, db)
	if err != nil {
		return nil, err
	}
	lev := map[string]int{}
	rows, err := db.QueryContext(ctx, "SELECT `symbol`, `leverageMax` FROM `fx_instrument`")
	if err != nil {
		return nil, fmt.Errorf("load instrument leverage: %w", err)
	}
	for rows.Next() {
		var s string
		var l int
		if err := rows.Scan(&s, &l); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load instrument leverage: %w", err)
		}
		lev[s] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load instrument leverage: %w", err)
	}

	groups := map[string]SymbolGroup{}
	rows, err = db.QueryContext(ctx, "SELECT `name`, `markupPoints`, `commissionPerLot`, `commissionCurrency`, `hedgedMarginRate` FROM `fx_symbol_group`")
	if err != nil {
		return nil, fmt.Errorf("load symbol groups: %w", err)
	}
	for rows.Next() {
		var g SymbolGroup
		if err := rows.Scan(&g.Name, &g.MarkupPoints, &g.CommissionPerLot, &g.CommissionCurrency, &g.HedgedMarginRate); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load symbol groups: %w", err)
		}
		groups[g.Name] = g
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load symbol groups: %w", err)
	}

	cat := &Catalog{Instruments: map[string]Instrument{}, Pairs: map[string]string{}, AccountGroups: map[string]AccountGroup{}, Currencies: map[string]bool{"USD": true}, SymbolGroups: groups, Tradable: map[string]Instrument{}}
	for _, in := range all {
		g, ok := groups[in.SymbolGroup]
		if !ok {
			// An instrument in a group nobody defined trades at no markup or commission, with
			// hedged pairs at half margin, rather than not at all.
			g = SymbolGroup{Name: in.SymbolGroup, MarkupPoints: decimal.Zero, CommissionPerLot: decimal.Zero, CommissionCurrency: "USD", HedgedMarginRate: decimal.NewFromFloat(0.5)}
		}
		ti := Instrument{Instrument: in, LeverageMax: lev[in.Symbol], Group: g}
		if ti.LeverageMax <= 0 {
			ti.LeverageMax = 1
		}
		cat.Instruments[in.Symbol] = ti
		cat.Pairs[in.Base+in.Quote] = in.Symbol
		cat.List = append(cat.List, ti)
		if in.Enabled {
			cat.Tradable[in.Symbol] = ti
			cat.TradableList = append(cat.TradableList, ti)
		}
		if in.Base == "USD" {
			cat.Currencies[in.Quote] = true
		}
		if in.Quote == "USD" {
			cat.Currencies[in.Base] = true
		}
	}

	rows, err = db.QueryContext(ctx, "SELECT "+accountGroupCols+" FROM `fx_account_group`")
	if err != nil {
		return nil, fmt.Errorf("load account groups: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		g, err := scanAccountGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("load account groups: %w", err)
		}
		cat.AccountGroups[g.Name] = g
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load account groups: %w", err)
	}
	if cat.overrides, err = loadOverrides(ctx, db); err != nil {
		return nil, err
	}
	if cat.Routing, cat.RoutingUsesProfile, err = loadRoutingRules(ctx, db); err != nil {
		return nil, err
	}
	return cat, nil
}
