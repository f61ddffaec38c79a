package trading

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// SymbolGroup prices the instruments in it.
type SymbolGroup struct {
	Name               string
	MarkupPoints       decimal.Decimal
	CommissionPerLot   decimal.Decimal
	CommissionCurrency string
	HedgedMarginRate   decimal.Decimal
}

// Instrument is the domain instrument with the trading terms kept beside it: its leverage cap
// (a column the trading migration adds; at least 1 here) and its symbol group.
type Instrument struct {
	fx.Instrument
	LeverageMax int
	Group       SymbolGroup
}

// AccountGroup caps leverage and sets the margin-call and stop-out levels (percent).
type AccountGroup struct {
	Name            string
	LeverageMax     int
	MarginCallLevel decimal.Decimal
	StopOutLevel    decimal.Decimal
	Execution       fx.ExecutionMode
}

const accountGroupCols = "`name`, `leverageMax`, `marginCallLevel`, `stopOutLevel`, `executionMode`"

func scanAccountGroup(sc scanner) (AccountGroup, error) {
	var g AccountGroup
	err := sc.Scan(&g.Name, &g.LeverageMax, &g.MarginCallLevel, &g.StopOutLevel, &g.Execution)
	return g, err
}

// catalog is an immutable snapshot of instruments and groups.
type catalog struct {
	instruments   map[string]Instrument
	pairs         map[string]string // base+quote → symbol, for the USD hub
	accountGroups map[string]AccountGroup
	currencies    map[string]bool // currencies the hub can convert
	symbolGroups  map[string]SymbolGroup
	list          []Instrument
	// tradable and tradableList hold the enabled instruments, for the markets routes.
	tradable     map[string]Instrument
	tradableList []Instrument
}

// catalogCache re-reads the catalog at most every maxAge, and at once after an admin change in
// this process. Instruments and groups change rarely; reading them per order would cost a
// round trip for nothing.
type catalogCache struct {
	db     *sql.DB
	maxAge time.Duration

	mu     sync.Mutex
	cur    *catalog
	loaded time.Time
	last   atomic.Pointer[catalog] // the latest loaded, kept through invalidate (lastLoaded)
}

func (c *catalogCache) get(ctx context.Context) (*catalog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != nil && time.Since(c.loaded) < c.maxAge {
		return c.cur, nil
	}
	cat, err := loadCatalog(ctx, c.db)
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

// lastLoaded is the latest catalog loaded, however old; it reads the database only when none
// was ever loaded. It is for a close the risk engine triggers on an EXTERNAL position: on its
// way to the venue it needs only the instrument's contract size, and it must not wait for a
// reload (a database read, with every other close of the burst queued behind its lock) first.
func (c *catalogCache) lastLoaded(ctx context.Context) (*catalog, error) {
	if cat := c.last.Load(); cat != nil {
		return cat, nil
	}
	return c.get(ctx)
}

func (c *catalogCache) invalidate() {
	c.mu.Lock()
	c.cur = nil
	c.mu.Unlock()
}

func loadCatalog(ctx context.Context, db *sql.DB) (*catalog, error) {
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

	cat := &catalog{instruments: map[string]Instrument{}, pairs: map[string]string{}, accountGroups: map[string]AccountGroup{}, currencies: map[string]bool{"USD": true}, symbolGroups: groups, tradable: map[string]Instrument{}}
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
		cat.instruments[in.Symbol] = ti
		cat.pairs[in.Base+in.Quote] = in.Symbol
		cat.list = append(cat.list, ti)
		if in.Enabled {
			cat.tradable[in.Symbol] = ti
			cat.tradableList = append(cat.tradableList, ti)
		}
		if in.Base == "USD" {
			cat.currencies[in.Quote] = true
		}
		if in.Quote == "USD" {
			cat.currencies[in.Base] = true
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
		cat.accountGroups[g.Name] = g
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load account groups: %w", err)
	}
	return cat, nil
}
