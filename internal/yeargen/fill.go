package yeargen

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"fxdesk/internal/fx"
	"fxdesk/internal/sim/feedsim"
)

// Fill writes size's history ending at end into db (a migrated, empty database) from seed; the
// same seed and size write the same history (the API tokens apart: they are issued fresh). log
// reports progress.
//
// Fill is fastest on a pool whose sessions skip the unique and foreign key checks (LoaderDSN):
// every key it writes is unique by construction and every reference points at a row it writes.
func Fill(ctx context.Context, db *sql.DB, size Size, seed int64, end time.Time, log *slog.Logger) (Result, error) {
	began := time.Now()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_account`").Scan(&n); err != nil {
		return Result{}, fmt.Errorf("yeargen: %w", err)
	}
	if n > 0 {
		return Result{}, fmt.Errorf("yeargen: the database already holds %d accounts: fill an empty one", n)
	}
	p, err := newPlan(ctx, db, size, seed, end)
	if err != nil {
		return Result{}, err
	}
	p.build(log)
	res, err := p.write(ctx, db, log)
	if err != nil {
		return Result{}, err
	}
	res.Took = time.Since(began)
	log.InfoContext(ctx, "yeargen: filled", slog.Duration("took", res.Took), slog.Int64("deals", res.Deals),
		slog.Int64("positions", res.Positions), slog.Int64("events", res.Events))
	return res, nil
}

// newPlan lays out the range: its hours with their weights, its weekday rollovers, the
// instruments fx_instrument holds and their prices.
func newPlan(ctx context.Context, db *sql.DB, size Size, seed int64, end time.Time) (*plan, error) {
	if size.Accounts < 2 || size.Days < 2 {
		return nil, fmt.Errorf("yeargen: a size needs at least 2 accounts and 2 days (got %d, %d)", size.Accounts, size.Days)
	}
	ny, err := fx.NewYork()
	if err != nil {
		return nil, err
	}
	p := &plan{size: size, seed: seed, ny: ny}
	p.end = end.UnixMilli()
	p.start = end.Add(-time.Duration(size.Days) * 24 * time.Hour).Truncate(time.Hour).UnixMilli()
	hours := int((p.end-p.start)/hourMS) + 1
	p.hourW = make([]float64, hours)
	p.quietHour = make([]bool, hours)
	p.hourCum = make([]float64, hours+1)
	for h := range p.hourW {
		t := time.UnixMilli(p.start + int64(h)*hourMS)
		l := t.In(ny)
		wd, hr := l.Weekday(), l.Hour()
		closed := wd == time.Saturday || (wd == time.Friday && hr >= 17) || (wd == time.Sunday && hr < 17)
		if !closed {
			// London and New York trade most; Asia's hours less.
			switch u := t.UTC().Hour(); {
			case u >= 7 && u < 17:
				p.hourW[h] = 1
			case u >= 17 && u < 21:
				p.hourW[h] = 0.6
			default:
				p.hourW[h] = 0.3
			}
		}
		p.quietHour[h] = hr == 17 && l.Minute() == 0 && wd != time.Saturday && wd != time.Sunday
		p.hourCum[h+1] = p.hourCum[h] + p.hourW[h]
	}
	r, err := fx.LastRollover(end)
	if err != nil {
		return nil, err
	}
	for ; r.At.UnixMilli() > p.start; r = r.Previous() {
		if wd := r.Weekday(); wd != time.Saturday && wd != time.Sunday {
			p.cuts = append(p.cuts, r.At.UnixMilli())
			p.cutDates = append(p.cutDates, r.Date)
		}
	}
	for i, j := 0, len(p.cuts)-1; i < j; i, j = i+1, j-1 {
		p.cuts[i], p.cuts[j] = p.cuts[j], p.cuts[i]
		p.cutDates[i], p.cutDates[j] = p.cutDates[j], p.cutDates[i]
	}
	rows, err := db.QueryContext(ctx, "SELECT `symbol`, `base`, `quote`, `digits`, `contractSize`, `point`, `swapLong`, `swapShort`, `tripleSwapDay` "+
		"FROM `fx_instrument` WHERE `enabled` = 1 ORDER BY `symbol`")
	if err != nil {
		return nil, fmt.Errorf("yeargen: instruments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var in instrument
		var triple int
		if err := rows.Scan(&in.symbol, &in.base, &in.quote, &in.digits, &in.contract, &in.point, &in.swapLong, &in.swapShort, &triple); err != nil {
			return nil, fmt.Errorf("yeargen: instruments: %w", err)
		}
		in.tripleDay = time.Weekday(triple)
		in.swapLongF, _ = strconv.ParseFloat(in.swapLong, 64)
		in.swapShortF, _ = strconv.ParseFloat(in.swapShort, 64)
		p.ins = append(p.ins, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("yeargen: instruments: %w", err)
	}
	if len(p.ins) == 0 || len(p.ins) > 255 {
		return nil, fmt.Errorf("yeargen: %d enabled instruments (want 1 to 255): is the database migrated?", len(p.ins))
	}
	p.buildPrices(feedsim.DefaultInstruments())
	return p, nil
}

// build plans the whole history in memory.
func (p *plan) build(log *slog.Logger) {
	t0 := time.Now()
	closedN, openN, pendingN := p.planAccounts()
	s := p.size
	est := float64(s.Accounts)*1.5 + float64(s.ClosedPositions)/40
	dealerShare := 0.0
	if s.ClosedPositions > 0 {
		dealerShare = min(0.3, max(0, float64(s.Audit)-est)/float64(s.ClosedPositions))
	}
	p.positions = make([]position, 0, s.ClosedPositions+s.OpenPositions)
	p.orders = make([]order, 0, (s.ClosedPositions+s.OpenPositions)*21/20+s.RestingOrders)
	p.deals = make([]deal, 0, (s.ClosedPositions+s.OpenPositions)*5/2)
	for i := range p.accounts {
		p.planAccount(i, closedN[i], openN[i], pendingN[i], dealerShare)
	}
	p.number()
	p.planEvents()
	log.Info("yeargen: planned", slog.Int("accounts", len(p.accounts)), slog.Int("positions", len(p.positions)),
		slog.Int("orders", len(p.orders)), slog.Int("deals", len(p.deals)), slog.Int("events", len(p.events)),
		slog.Int("rollovers", len(p.cuts)), slog.Duration("took", time.Since(t0)))
}
