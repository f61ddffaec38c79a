package yeargen

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/events"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/pnl"
	"fxdesk/internal/relay"
	"fxdesk/internal/store"
)

// writers is how many connections write at once: the server, not the generator, is the
// bottleneck, and more than a few connections only contend for its log.
const writers = 3

// dealerUser is the staff user whose deposits, closes and cancels the audit rows record.
const dealerUser = 1

// term is the lease term the generated events name as their writer's.
const term = 1

// write writes the plan, in that order: the accounts (every other row refers to one), then the
// rest on several connections at once, then the counters that must follow the rows (the event
// sequence and the relay's cursor), the tokens, the optimiser's statistics and the P&L summaries.
func (p *plan) write(ctx context.Context, db *sql.DB, log *slog.Logger) (Result, error) {
	endT := utc(p.end)
	res := Result{BigAccount: 1, SmallAccount: 2, BigUser: p.accounts[0].user, SmallUser: p.accounts[1].user, End: endT}
	whole, err := loadsWhole(ctx, db)
	if err != nil {
		return res, err
	}
	w := newWriter(ctx, db, writers, whole, log)
	p.writeAccounts(w)
	if err := w.run(); err != nil {
		return res, err
	}
	t0 := time.Now()
	e := p.endOfDay()
	log.Info("yeargen: end of day planned", slog.Int("days", e.frozen), slog.Int("accountRows", len(e.accounts)), slog.Duration("took", time.Since(t0)))
	w = newWriter(ctx, db, writers, whole, log)
	p.writeOrders(w)
	p.writePositions(w)
	p.writeDeals(w)
	swaps := p.writeSwaps(w)
	kept := min(len(p.events), p.size.Events)
	p.writeEvents(w, len(p.events)-kept)
	nAudit := p.writeAudit(w)
	p.writeEndOfDay(w, e)
	p.writeProfiles(w)
	t0 = time.Now()
	if err := w.run(); err != nil {
		return res, err
	}
	log.Info("yeargen: tables written", slog.Duration("took", time.Since(t0)))
	res.Accounts, res.Orders, res.Positions, res.Deals = int64(len(p.accounts)), int64(len(p.orders)), int64(len(p.positions)), int64(len(p.deals))
	res.SwapCharges, res.Events, res.Audit = int64(swaps), int64(kept), int64(nAudit)
	res.EODAccounts, res.EODDays = int64(len(e.accounts)), int64(e.frozen)

	// The outbox's sequence stands at the last id the desk would have handed out (the pruned
	// ones included), and the relay's cursor past it: nothing generated is relayed again.
	last := len(p.events)
	if err := events.LoadSequence(ctx, db, int64(last)); err != nil {
		return res, fmt.Errorf("yeargen: %w", err)
	}
	if err := relay.SkipHistory(ctx, db, int64(last), term, utc(p.end)); err != nil {
		return res, fmt.Errorf("yeargen: %w", err)
	}

	actx := audit.WithActor(ctx, audit.Actor{Via: "cli"})
	if res.BigToken, _, err = auth.Issue(actx, db, auth.Grant{UserID: res.BigUser, Role: auth.RoleTrader, Scopes: auth.AllScopes, Label: "yeargen big trader"}); err != nil {
		return res, fmt.Errorf("yeargen: token: %w", err)
	}
	if res.SmallToken, _, err = auth.Issue(actx, db, auth.Grant{UserID: res.SmallUser, Role: auth.RoleTrader, Scopes: auth.AllScopes, Label: "yeargen small trader"}); err != nil {
		return res, fmt.Errorf("yeargen: token: %w", err)
	}
	if res.DealerToken, _, err = auth.Issue(actx, db, auth.Grant{UserID: dealerUser, Role: auth.RoleDealer, Label: "yeargen dealer"}); err != nil {
		return res, fmt.Errorf("yeargen: token: %w", err)
	}

	// The statistics before the summaries, which are the first reads of the tables: a table
	// loaded in one statement has its statistics brought up to date in the background only
	// after, and a summary's join planned meanwhile as if an account had one position (every
	// account scanned, then its positions) read a year's positions for one day's openings, for
	// minutes a day (docs/operations.md, «A year of data»).
	t0 = time.Now()
	for _, t := range []string{"fx_account", "fx_order", "fx_position", "fx_deal", "fx_swap_charge", "fx_event", "fx_audit", "fx_eod_account", "fx_eod_symbol", "fx_account_profile"} {
		rows, err := db.QueryContext(ctx, "ANALYZE TABLE `"+t+"`")
		if err != nil {
			return res, fmt.Errorf("yeargen: analyze %s: %w", t, err)
		}
		rows.Close()
	}
	log.Info("yeargen: analyzed", slog.Duration("took", time.Since(t0)))
	t0 = time.Now()
	periods, err := pnl.Summarise(ctx, db, endT)
	if err != nil {
		return res, fmt.Errorf("yeargen: P&L summaries: %w", err)
	}
	log.Info("yeargen: P&L summarised", slog.Int("periods", periods), slog.Duration("took", time.Since(t0)))
	return res, nil
}

// loadsWhole is whether db's sessions load each table in one LOAD DATA statement: when they
// skip the unique and foreign key checks (OpenLoader's), so that MariaDB's load into an empty
// table is a bulk load, and the server takes local files. MariaDB sorts a bulk load's index
// entries one statement at a time: a table written in statements of thousands of rows has each
// statement's entries inserted into its indexes as they stand, at random places in secondary
// indexes bigger than the buffer pool, while one statement for the whole table builds each index
// once (docs/operations.md, «A year of data»). Otherwise the tables go in statements of thousands
// of rows, each refused on its own if a row does not fit.
func loadsWhole(ctx context.Context, db *sql.DB) (bool, error) {
	var unique, foreign int
	if err := db.QueryRowContext(ctx, "SELECT @@SESSION.unique_checks, @@SESSION.foreign_key_checks").Scan(&unique, &foreign); err != nil {
		return false, fmt.Errorf("yeargen: %w", err)
	}
	if unique != 0 || foreign != 0 {
		return false, nil
	}
	local, err := store.LocalInfile(ctx, db)
	if err != nil {
		return false, fmt.Errorf("yeargen: %w", err)
	}
	return local, nil
}

func (p *plan) writeAccounts(w *writer) {
	t := table{"fx_account", []string{"id", "userId", "currency", "leverage", "balance", "balanceVersion", "equity", "createdAt", "updatedAt"}}
	end := sqlTime(p.end)
	w.insert(t, len(p.accounts), func(i int, args []any) []any {
		a := &p.accounts[i]
		return append(args, a.id, a.user, currencies[a.ccy], a.leverage, money(a.balance), a.version, money(a.balance), sqlTime(a.created), end)
	})
}

// price formats points of instrument sym; 0 is NULL.
func (p *plan) price(sym uint8, pts int64) any {
	if pts == 0 {
		return nil
	}
	return fixed(pts, p.ins[sym].digits)
}

func (p *plan) priceText(sym uint8, pts int64) *string {
	if pts == 0 {
		return nil
	}
	s := fixed(pts, p.ins[sym].digits)
	return &s
}

func (p *plan) writeOrders(w *writer) {
	t := table{"fx_order", []string{"id", "accountId", "symbol", "side", "type", "volume", "price", "sl", "tp", "timeInForce", "status",
		"fillPrice", "createdAt", "updatedAt", "triggeredAt"}}
	w.insert(t, len(p.orders), func(i int, args []any) []any {
		o := &p.orders[p.ordersByID[i]]
		var fill, triggered any
		updated := o.createdAt
		if o.pos >= 0 {
			fill = p.price(o.sym, p.positions[o.pos].openPx)
			updated = o.done
			if o.typ != orderMarket {
				triggered = sqlTime(o.done)
			}
		} else if o.done > 0 {
			updated = o.done
		}
		return append(args, o.id, p.accounts[o.acct].id, p.ins[o.sym].symbol, sideNames[o.side], orderTypes[o.typ], volume(o.lots),
			p.price(o.sym, o.price), p.price(o.sym, o.sl), p.price(o.sym, o.tp), "GTC", orderStatuses[o.status], fill,
			sqlTime(o.createdAt), sqlTime(updated), triggered)
	})
}

func (p *plan) writePositions(w *writer) {
	t := table{"fx_position", []string{"id", "accountId", "orderId", "symbol", "side", "volume", "openVolume", "openPrice", "sl", "tp",
		"commission", "markup", "realizedProfit", "status", "closePrice", "closeReason", "openedAt", "closedAt", "updatedAt", "swap", "swapThrough"}}
	w.insert(t, len(p.positions), func(i int, args []any) []any {
		ps := &p.positions[p.positionsByID[i]]
		status, vol := "OPEN", volume(ps.lots)
		var closePx, reason, closedAt any
		updated := ps.openAt
		if !ps.open {
			status, vol = "CLOSED", "0"
			closePx, reason, closedAt, updated = p.price(ps.sym, ps.closePx), closeReasons[ps.reason], sqlTime(ps.closeAt), ps.closeAt
		}
		var through any
		if ps.swapThrough > 0 {
			through = p.cutDates[ps.swapThrough-1]
			updated = max(updated, p.cuts[ps.swapThrough-1])
		}
		return append(args, ps.id, p.accounts[ps.acct].id, p.orders[ps.order].id, p.ins[ps.sym].symbol, sideNames[ps.side], vol, volume(ps.lots),
			p.price(ps.sym, ps.openPx), p.price(ps.sym, ps.sl), p.price(ps.sym, ps.tp), money(ps.commission), money(ps.markupOpen), money(ps.profit),
			status, closePx, reason, sqlTime(ps.openAt), closedAt, sqlTime(updated), money(ps.swap), through)
	})
}

// dealKey is deal k's idempotency key, as the desk names each kind.
func (p *plan) dealKey(k int) string {
	d := &p.deals[k]
	switch d.typ {
	case dealDeposit:
		return "deposit:" + strconv.FormatInt(p.accounts[d.acct].id, 10) + ":gen-" + strconv.FormatInt(d.id, 10)
	case dealCommission:
		return "commission:order:" + strconv.FormatInt(p.orders[p.positions[d.pos].order].id, 10)
	case dealProfit:
		ps := &p.positions[d.pos]
		return "close:" + strconv.FormatInt(ps.id, 10) + ":" + volume(ps.lots)
	default:
		return "swap:" + strconv.FormatInt(p.positions[d.pos].id, 10) + ":" + p.cutDates[d.cut]
	}
}

func (p *plan) dealComment(k int) string {
	d := &p.deals[k]
	switch d.typ {
	case dealDeposit:
		return "deposit"
	case dealCommission:
		return "commission at open"
	case dealProfit:
		return "close " + map[uint8]string{closeClient: "client", closeSL: "sl", closeTP: "tp", closeDealer: "dealer"}[p.positions[d.pos].reason]
	default:
		if d.days == 1 {
			return "swap " + p.cutDates[d.cut]
		}
		return "swap " + p.cutDates[d.cut] + " x" + strconv.Itoa(int(d.days))
	}
}

// loaded is deal k as the ledger loads it.
func (p *plan) loaded(k int) ledger.Loaded {
	d := &p.deals[k]
	ccy := currencies[p.accounts[d.acct].ccy]
	l := ledger.Loaded{ID: d.id, AccountID: p.accounts[d.acct].id, Type: dealTypes[d.typ], Amount: money(d.amount), BalanceAfter: money(d.after),
		Currency: ccy, IdempotencyKey: p.dealKey(k), Comment: p.dealComment(k), CreatedAt: sqlTime(d.t)}
	if d.pos < 0 {
		return l
	}
	ps := &p.positions[d.pos]
	pid, sym, side, vol := ps.id, p.ins[ps.sym].symbol, sideNames[ps.side], volume(ps.lots)
	l.PositionID, l.Symbol, l.Side, l.Volume = &pid, &sym, &side, &vol
	switch d.typ {
	case dealCommission:
		oid := p.orders[ps.order].id
		l.OrderID, l.Price = &oid, p.priceText(ps.sym, ps.openPx)
	case dealProfit:
		oid, mk := p.orders[ps.order].id, money(ps.markupClose)
		l.OrderID, l.Price, l.Markup = &oid, p.priceText(ps.sym, ps.closePx), &mk
	}
	return l
}

func (p *plan) writeDeals(w *writer) {
	w.load("fx_deal", len(p.deals), min(ledger.MaxLoadRows, 4000), func(from, to int) chunk {
		batch := make([]ledger.Loaded, 0, to-from)
		for k := from; k < to; k++ {
			batch = append(batch, p.loaded(k))
		}
		return func(ctx context.Context, tx *sql.Tx) error { return ledger.Load(ctx, tx, batch) }
	}, func(ctx context.Context, tx *sql.Tx) error { return ledger.LoadAll(ctx, tx, len(p.deals), p.loaded) })
}

func (p *plan) writeSwaps(w *writer) int {
	var idx []int32
	for k := range p.deals {
		if p.deals[k].typ == dealSwap {
			idx = append(idx, int32(k))
		}
	}
	// In primary key order (position, rollover date).
	slices.SortFunc(idx, func(x, y int32) int {
		a, b := &p.deals[x], &p.deals[y]
		return cmp.Or(cmp.Compare(p.positions[a.pos].id, p.positions[b.pos].id), cmp.Compare(a.cut, b.cut))
	})
	// amountQuote exactly: swap points × point × contract size per lot.
	perLot := make([][2]decimal.Decimal, len(p.ins))
	for i, in := range p.ins {
		pt, ct := decimal.NewFromFloat(in.point), decimal.NewFromFloat(in.contract)
		perLot[i] = [2]decimal.Decimal{decimal.RequireFromString(in.swapLong).Mul(pt).Mul(ct), decimal.RequireFromString(in.swapShort).Mul(pt).Mul(ct)}
	}
	t := table{"fx_swap_charge", []string{"positionId", "rolloverDate", "accountId", "symbol", "side", "volume", "days", "amountQuote", "quoteCurrency",
		"accountCurrency", "status", "amount", "createdAt", "lastTriedAt", "settledAt"}}
	w.insert(t, len(idx), func(i int, args []any) []any {
		d := &p.deals[idx[i]]
		ps := &p.positions[d.pos]
		in := &p.ins[ps.sym]
		q := perLot[ps.sym][ps.side].Mul(decimal.New(int64(ps.lots)*int64(d.days), -2))
		at := sqlTime(d.t)
		return append(args, ps.id, p.cutDates[d.cut], p.accounts[d.acct].id, in.symbol, sideNames[ps.side], volume(ps.lots), d.days, q.String(),
			in.quote, currencies[p.accounts[d.acct].ccy], "CHARGED", money(d.amount), at, at, at)
	})
	return len(idx)
}

// Payloads, in the events package's own types so that they read as the desk's.

func (p *plan) orderView(k int32, status uint8) events.Order {
	o := &p.orders[k]
	v := events.Order{ID: o.id, AccountID: p.accounts[o.acct].id, Symbol: p.ins[o.sym].symbol, Side: fx.Side(sideNames[o.side]), Type: orderTypes[o.typ],
		Volume: volume(o.lots), Price: p.priceText(o.sym, o.price), SL: p.priceText(o.sym, o.sl), TP: p.priceText(o.sym, o.tp), TimeInForce: "GTC",
		Status: orderStatuses[status], CreatedAt: utc(o.createdAt)}
	if status == statusFilled && o.pos >= 0 {
		ps := &p.positions[o.pos]
		v.FillPrice, v.PositionID = p.priceText(o.sym, ps.openPx), &ps.id
		if o.typ != orderMarket {
			at := utc(o.done)
			v.TriggeredAt = &at
		}
	}
	return v
}

func (p *plan) positionView(k int32, closed bool) events.Position {
	ps := &p.positions[k]
	ccy := currencies[p.accounts[ps.acct].ccy]
	v := events.Position{ID: ps.id, AccountID: p.accounts[ps.acct].id, OrderID: p.orders[ps.order].id, Symbol: p.ins[ps.sym].symbol,
		Side: fx.Side(sideNames[ps.side]), Volume: volume(ps.lots), InitialVolume: volume(ps.lots), OpenPrice: fixed(ps.openPx, p.ins[ps.sym].digits),
		SL: p.priceText(ps.sym, ps.sl), TP: p.priceText(ps.sym, ps.tp), Commission: fx.FormatMoney(ccy, decimal.New(ps.commission, -2)),
		RealizedProfit: money(0), Status: "OPEN", OpenedAt: utc(ps.openAt), Execution: "INTERNAL"}
	if closed {
		at, reason := utc(ps.closeAt), closeReasons[ps.reason]
		v.Volume, v.RealizedProfit, v.Status, v.ClosePrice, v.CloseReason, v.ClosedAt = "0", money(ps.profit), "CLOSED", p.priceText(ps.sym, ps.closePx), &reason, &at
	}
	return v
}

func (p *plan) balanceView(k int32) events.Balance {
	l := p.loaded(int(k))
	b := events.Balance{AccountID: l.AccountID, Type: l.Type, Amount: l.Amount, BalanceAfter: l.BalanceAfter, Currency: l.Currency, OrderID: l.OrderID,
		PositionID: l.PositionID, Symbol: l.Symbol, Volume: l.Volume, Price: l.Price, IdempotencyKey: l.IdempotencyKey, Comment: l.Comment}
	if l.Side != nil {
		s := fx.Side(*l.Side)
		b.Side = &s
	}
	return b
}

// payload is event e's type and payload.
func (p *plan) payload(e *eventRef) (events.Type, any) {
	switch e.kind {
	case evDeposit:
		return events.Deposit, p.balanceView(e.ref)
	case evSwap:
		d := &p.deals[e.ref]
		return events.SwapCharged, events.Swap{Balance: p.balanceView(e.ref), RolloverDate: p.cutDates[d.cut], Days: int(d.days)}
	case evOrderFilled:
		return events.OrderFilled, p.orderView(e.ref, statusFilled)
	case evOrderTriggered:
		return events.OrderTriggered, p.orderView(e.ref, statusFilled)
	case evOrderAccepted:
		return events.OrderAccepted, p.orderView(e.ref, statusPending)
	case evOrderCancelled:
		return events.OrderCancelled, p.orderView(e.ref, statusCancelled)
	case evPositionOpened:
		return events.PositionOpened, p.positionView(e.ref, false)
	default:
		ps := &p.positions[e.ref]
		return events.PositionClosed, events.Closed{Position: p.positionView(e.ref, true), ClosedVolume: volume(ps.lots),
			Price: fixed(ps.closePx, p.ins[ps.sym].digits), Profit: money(ps.profit), Reason: closeReasons[ps.reason]}
	}
}

// writeEvents writes the outbox from event first on (the earlier ones were pruned, as retention
// would have done), each with the id the sequence gave it.
func (p *plan) writeEvents(w *writer, first int) {
	event := func(i int) events.Loaded {
		e := &p.events[first+i]
		typ, payload := p.payload(e)
		b, err := json.Marshal(payload)
		if err != nil {
			panic(err) // the payload types are the events package's own: encoding cannot fail
		}
		a := &p.accounts[e.acct]
		return events.Loaded{ID: int64(first + i + 1), AccountID: a.id, UserID: a.user, Type: typ,
			Payload: b, Term: term, CreatedAt: sqlTime(e.t)}
	}
	n := len(p.events) - first
	w.load("fx_event", n, min(events.MaxLoadRows, 4000), func(from, to int) chunk {
		batch := make([]events.Loaded, 0, to-from)
		for i := from; i < to; i++ {
			batch = append(batch, event(i))
		}
		return func(ctx context.Context, tx *sql.Tx) error { return events.Load(ctx, tx, batch) }
	}, func(ctx context.Context, tx *sql.Tx) error { return events.LoadAll(ctx, tx, n, event) })
}

type auditRow struct {
	t                int64
	action, kind, id string
	before, after    any
}

// writeAudit writes the staff's changes the history implies: every deposit (the desk's staff
// fund the accounts), the dealer's closes and cancels; the latest Size.Audit of them.
func (p *plan) writeAudit(w *writer) int {
	type balanceRecord struct {
		Balance        string `json:"balance"`
		Currency       string `json:"currency"`
		Deposited      string `json:"deposited,omitempty"`
		IdempotencyKey string `json:"idempotencyKey,omitempty"`
	}
	var rows []auditRow
	for k := range p.deals {
		d := &p.deals[k]
		if d.typ != dealDeposit {
			continue
		}
		ccy := currencies[p.accounts[d.acct].ccy]
		rows = append(rows, auditRow{t: d.t, action: "account.deposit", kind: "account", id: strconv.FormatInt(p.accounts[d.acct].id, 10),
			before: balanceRecord{Balance: money(d.after - d.amount), Currency: ccy},
			after:  balanceRecord{Balance: money(d.after), Currency: ccy, Deposited: money(d.amount), IdempotencyKey: p.dealKey(k)}})
	}
	for k := range p.positions {
		if ps := &p.positions[k]; !ps.open && ps.reason == closeDealer {
			rows = append(rows, auditRow{t: ps.closeAt, action: "position.close", kind: "position", id: strconv.FormatInt(ps.id, 10),
				before: p.positionView(int32(k), false), after: p.positionView(int32(k), true)})
		}
	}
	for k := range p.orders {
		if o := &p.orders[k]; o.byDealer {
			rows = append(rows, auditRow{t: o.done, action: "order.cancel", kind: "order", id: strconv.FormatInt(o.id, 10),
				before: p.orderView(int32(k), statusPending), after: p.orderView(int32(k), statusCancelled)})
		}
	}
	slices.SortStableFunc(rows, func(x, y auditRow) int { return cmp.Compare(x.t, y.t) })
	if len(rows) > p.size.Audit {
		rows = rows[len(rows)-p.size.Audit:]
	}
	t := table{"fx_audit", []string{"id", "at", "actorUserId", "actorVia", "action", "entityType", "entityId", "before", "after"}}
	w.insert(t, len(rows), func(i int, args []any) []any {
		r := &rows[i]
		b, _ := json.Marshal(r.before)
		a, _ := json.Marshal(r.after)
		return append(args, i+1, sqlTime(r.t), dealerUser, "api", r.action, r.kind, r.id, string(b), string(a))
	})
	return len(rows)
}

func (p *plan) writeEndOfDay(w *writer, e *endOfDay) {
	days := table{"fx_eod_day", []string{"tradingDay", "rolloverAt", "mode", "accounts", "frozenAt", "frozenBy"}}
	w.insert(days, e.frozen, func(c int, args []any) []any {
		return append(args, p.cutDates[c], sqlTime(p.cuts[c]), "ON_TIME", e.perDay[c], sqlTime(p.cuts[c]+freezeMS), "yeargen")
	})
	prices := table{"fx_eod_price", []string{"tradingDay", "symbol", "bid", "ask", "quotedAt", "capturedAt", "capturedBy"}}
	w.insert(prices, e.frozen*len(p.ins), func(i int, args []any) []any {
		c, s := i/len(p.ins), uint8(i%len(p.ins))
		in := &p.ins[s]
		mid := in.points(p.mid(s, p.cuts[c]))
		return append(args, p.cutDates[c], in.symbol, fixed(mid-in.halfSpread, in.digits), fixed(mid+in.halfSpread, in.digits),
			sqlTime(p.cuts[c]-1000), sqlTime(p.cuts[c]), "yeargen")
	})
	type deskRow struct {
		c, key int
	}
	var desk []deskRow
	for c := range e.desk {
		for k, f := range e.desk[c] {
			if f.used {
				desk = append(desk, deskRow{c, k})
			}
		}
	}
	sym := table{"fx_eod_symbol", []string{"tradingDay", "symbol", "currency", "bbookNet", "abookNet", "hedgeUnits", "realised", "markup", "commission",
		"swaps", "nbp", "hedgeBook", "takenAt"}}
	w.insert(sym, len(desk), func(i int, args []any) []any {
		r := desk[i]
		f := &e.desk[r.c][r.key]
		return append(args, p.cutDates[r.c], p.ins[r.key/len(currencies)].symbol, currencies[r.key%len(currencies)], fixed(f.net, 2), "0", "0",
			money(f.realised), money(f.markup), money(f.commission), money(f.swaps), "0", "0", sqlTime(p.cuts[r.c]+freezeMS))
	})
	acc := table{"fx_eod_account", []string{"tradingDay", "accountId", "currency", "balance", "equity", "margin", "freeMargin", "floatingPnl",
		"openPositions", "pendingOrders", "throughDealId", "takenAt"}}
	w.insert(acc, len(e.accounts), func(i int, args []any) []any {
		r := &e.accounts[i]
		a := &p.accounts[r.acct]
		return append(args, p.cutDates[r.cut], a.id, currencies[a.ccy], money(r.balance), money(r.equity), money(r.margin), money(r.equity-r.margin),
			money(r.floating), r.openPositions, r.pending, r.throughDeal, sqlTime(p.cuts[r.cut]+freezeMS))
	})
}

func (p *plan) writeProfiles(w *writer) {
	type profile struct {
		trades, wins, gross, loss, hold, under, last int64
	}
	prof := make([]profile, len(p.accounts))
	for k := range p.positions {
		ps := &p.positions[k]
		if ps.open {
			continue
		}
		f := &prof[ps.acct]
		f.trades++
		switch {
		case ps.profit > 0:
			f.wins++
			f.gross += ps.profit
		case ps.profit < 0:
			f.loss -= ps.profit
		}
		held := ps.closeAt - ps.openAt
		f.hold += held
		if held < 60000 {
			f.under++
		}
		f.last = max(f.last, ps.closeAt)
	}
	var idx []int
	for i := range prof {
		if prof[i].trades > 0 {
			idx = append(idx, i)
		}
	}
	t := table{"fx_account_profile", []string{"accountId", "trades", "wins", "grossProfit", "grossLoss", "holdMillis", "underMinute", "lastTradeAt"}}
	w.insert(t, len(idx), func(i int, args []any) []any {
		f := &prof[idx[i]]
		return append(args, p.accounts[idx[i]].id, f.trades, f.wins, money(f.gross), money(f.loss), f.hold, f.under, sqlTime(f.last))
	})
}
