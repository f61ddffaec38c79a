package book

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/ledger"
	"fxdesk/internal/store"
)

// The rows a batch locks: the plan of what its writes need, and the rows as locked and read.

// Plan is what a batch's writes need locked and read.
type Plan struct {
	accounts  []int64          // to lock, any order (sorted when locked)
	positions []int64          // to lock after the accounts
	orders    []int64          // resting orders to lock after the positions
	nonces    []NonceKey       // request nonces to look up
	fills     []FillKey        // venue fills a close books: already booked?
	exposures []int64          // accounts whose open exposures a fill prices
	held      []HeldKey        // accounts' open positions on a symbol (held.go)
	AccountOf map[int64]int64  // position id → account id, read before the transaction
	unknown   map[int64]bool   // positions whose account is not known yet
	seen      map[planned]bool // de-duplication
}

// planned is one row a plan holds: its kind ('a' account, 'p' position, 'o' order, 'e' an
// account's exposures) and id.
type planned struct {
	kind byte
	id   int64
}

// FillKey is one venue fill booked against one position.
type FillKey struct{ Position, Tx int64 }

type NonceKey struct {
	Account int64
	Nonce   string
}

func (l *Plan) once(kind byte, id int64) bool {
	if l.seen == nil {
		l.seen = map[planned]bool{}
	}
	k := planned{kind, id}
	if l.seen[k] {
		return false
	}
	l.seen[k] = true
	return true
}

func (l *Plan) Account(id int64) {
	if l.once('a', id) {
		l.accounts = append(l.accounts, id)
	}
}

func (l *Plan) Position(id int64, accountKnown bool) {
	if l.once('p', id) {
		l.positions = append(l.positions, id)
	}
	if !accountKnown {
		if l.unknown == nil {
			l.unknown = map[int64]bool{}
		}
		l.unknown[id] = true
	}
}

func (l *Plan) Order(id int64) {
	if l.once('o', id) {
		l.orders = append(l.orders, id)
	}
}

func (l *Plan) ExposuresOf(account int64) {
	if l.once('e', account) {
		l.exposures = append(l.exposures, account)
	}
}

func (l *Plan) Nonce(account int64, nonce string) {
	k := NonceKey{account, nonce}
	if !slices.Contains(l.nonces, k) {
		l.nonces = append(l.nonces, k)
	}
}

func (l *Plan) Fill(position, tx int64) {
	if k := (FillKey{position, tx}); !slices.Contains(l.fills, k) {
		l.fills = append(l.fills, k)
	}
}

func (l *Plan) closesWithoutAccount() bool { return len(l.unknown) > 0 }

// readPositionAccounts reads the account of every position whose account is not known.
func (l *Plan) readPositionAccounts(ctx context.Context, conn *sql.Conn) error {
	ids := make([]any, 0, len(l.unknown))
	for id := range l.unknown {
		ids = append(ids, id)
	}
	rows, err := conn.QueryContext(ctx, "SELECT `id`, `accountId` FROM `fx_position` WHERE `id` IN ("+store.Placeholders(len(ids))+")", ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	l.AccountOf = map[int64]int64{}
	for rows.Next() {
		var id, acct int64
		if err := rows.Scan(&id, &acct); err != nil {
			return err
		}
		l.AccountOf[id] = acct
	}
	return rows.Err()
}

// Rows is one batch's view of the rows it holds, which its writes' rules read and change
// in memory in arrival order, and the statements those writes add.
type Rows struct {
	Catalog *catalog.Catalog
	Market  *Market // one view of prices for the whole batch
	Now     time.Time

	Accounts  map[int64]*Account
	locked    map[int64]decimal.Decimal // each account's balance as locked, where the ledger starts
	Versions  map[int64]int64           // each account's balanceVersion as locked
	Positions map[int64]*Position
	Orders    map[int64]*Order
	Nonces    map[NonceKey]Order
	Booked    map[FillKey]bool     // the venue fills of the plan's fills the ledger already holds
	Exposures map[int64][]Exposure // accounts a fill prices, kept up to date by the batch's writes
	Made      map[NonceKey]Write   // request nonces a fill of this batch wrote, and the fill
	// unread are accounts whose exposures a rule asked for (OpenExposures) and the batch did not
	// read: the batch is planned again with them read before anything is written.
	unread []int64
	// held and unreadHeld are the same for held positions (held.go).
	held       map[HeldKey][]*Held
	unreadHeld []HeldKey

	Writes Batch             // the writes, in arrival order
	Deals  []Deal            // the batch's ledger postings, in arrival order
	posted []Deal            // the deals as the ledger wrote them
	Marks  map[int64]Metrics // new stored marks, by account (a fill's)
	// Closed are the positions the batch's closes changed, written by one statement (closeUpdate).
	Closed      map[int64]*Position
	closedOrder []int64
	vars        int // session variables named so far
	IDs         IDs // what the batch reads back before COMMIT
	committed   bool
}

// IDs is what a batch reads back before COMMIT: its session variables' values, the id of its
// first deal and the step between the ids of one INSERT.
type IDs struct {
	names     []string
	Values    []int64
	firstDeal int64
	// step is the session's auto_increment_increment: 1 on one server, the cluster's size on a
	// Galera node (wsrep_auto_increment_control), where one INSERT's ids are 3 apart on three
	// nodes.
	step int64
}

// add adds the batch's row locks and reads to b: every account in id order, then the positions,
// then the resting orders, then the request nonces and the exposures the fills need. The locks
// go through the primary key: a locking read that scanned the table instead (the optimizer's
// choice for many ids of a small table) would lock every row it passed — accounts a deposit or
// a swap is writing among them.
func (r *Rows) add(b *Batch, l *Plan) {
	r.reset()
	if len(l.accounts) > 0 {
		ids := slices.Sorted(slices.Values(l.accounts))
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				var version int64
				a, err := ScanAccount(versioned{rows, &version})
				if err != nil {
					return err
				}
				r.Accounts[a.ID], r.locked[a.ID], r.Versions[a.ID] = &a, a.Balance, version
			}
			return nil
		}, "SELECT "+AccountCols+", `balanceVersion` FROM `fx_account` FORCE INDEX (PRIMARY) WHERE `id` IN ("+store.Placeholders(len(ids))+") ORDER BY `id` FOR UPDATE", store.Int64Args(ids)...)
	}
	if len(l.positions) > 0 {
		// A position's currency is its account's, read just above; a position whose account the
		// batch does not lock has none, and no write applies its rules to it (a close refuses a
		// position that is not its locked account's).
		ids := slices.Sorted(slices.Values(l.positions))
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				p, err := ScanPosition(rows)
				if err != nil {
					return err
				}
				if a, ok := r.Accounts[p.AccountID]; ok {
					p.Currency = a.Currency
				}
				r.Positions[p.ID] = &p
			}
			return nil
		}, "SELECT "+lockedPositionCols+" FROM `fx_position` p FORCE INDEX (PRIMARY) WHERE p.`id` IN ("+store.Placeholders(len(ids))+") ORDER BY p.`id` FOR UPDATE", store.Int64Args(ids)...)
	}
	r.addHeld(b, l)
	if len(l.orders) > 0 {
		ids := slices.Sorted(slices.Values(l.orders))
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				o, err := ScanOrder(rows)
				if err != nil {
					return err
				}
				r.Orders[o.ID] = &o
			}
			return nil
		}, "SELECT "+OrderCols+" FROM `fx_order` o FORCE INDEX (PRIMARY) WHERE o.`id` IN ("+store.Placeholders(len(ids))+") ORDER BY o.`id` FOR UPDATE", store.Int64Args(ids)...)
	}
	if len(l.nonces) > 0 {
		// The account locks serialise the submits of each account, so a retry racing its
		// original waits for it and then finds it here, before any rule could refuse the retry.
		var where []string
		var args []any
		for _, k := range l.nonces {
			where = append(where, "(o.`accountId` = ? AND o.`requestNonce` = ?)")
			args = append(args, k.Account, k.Nonce)
		}
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				o, err := ScanOrder(rows)
				if err != nil {
					return err
				}
				if o.RequestNonce != nil {
					r.Nonces[NonceKey{o.AccountID, *o.RequestNonce}] = o
				}
			}
			return nil
		}, "SELECT "+OrderCols+" FROM `fx_order` o WHERE "+strings.Join(where, " OR "), args...)
	}
	if len(l.fills) > 0 {
		// A venue fill is booked once per position (uq_fx_deal_venue_fill, and fx_deal_venue_fill
		// for the other executions of a fill in several): one the ledger holds already — the send
		// booked it while the reconciler planned it too — is answered as booked, instead of
		// failing the batch on the key and writing it row by row.
		var where []string
		var args []any
		for _, k := range l.fills {
			where = append(where, "(`positionId` = ? AND `venueTransactionId` = ?)")
			args = append(args, k.Position, k.Tx)
		}
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				var k FillKey
				if err := rows.Scan(&k.Position, &k.Tx); err != nil {
					return err
				}
				r.Booked[k] = true
			}
			return nil
		}, "SELECT `positionId`, `venueTransactionId` FROM `fx_deal` WHERE "+strings.Join(where, " OR ")+
			" UNION ALL SELECT `positionId`, `venueTransactionId` FROM `fx_deal_venue_fill` WHERE "+strings.Join(where, " OR "), append(args, args...)...)
	}
	if len(l.exposures) > 0 {
		ids := slices.Sorted(slices.Values(l.exposures))
		for _, id := range ids {
			r.Exposures[id] = []Exposure{}
		}
		b.Query(func(rows *sql.Rows) error {
			for rows.Next() {
				var acct int64
				var e Exposure
				if err := rows.Scan(&acct, &e.Symbol, &e.Side, &e.Volume, &e.VolumePrice); err != nil {
					return err
				}
				r.Exposures[acct] = append(r.Exposures[acct], e)
			}
			return nil
		}, "SELECT `accountId`, `symbol`, `side`, SUM(`volume`), SUM(`volume` * `openPrice`) FROM `fx_position` "+
			"WHERE `accountId` IN ("+store.Placeholders(len(ids))+") AND `status` = 'OPEN' GROUP BY `accountId`, `symbol`, `side` "+
			"ORDER BY `accountId`, `symbol`, `side`", store.Int64Args(ids)...)
	}
}

// reset empties the batch's view of its rows, before they are locked (or remembered).
func (r *Rows) reset() {
	r.Accounts, r.locked, r.Versions = map[int64]*Account{}, map[int64]decimal.Decimal{}, map[int64]int64{}
	r.Positions, r.Orders, r.Nonces, r.Booked = map[int64]*Position{}, map[int64]*Order{}, map[NonceKey]Order{}, map[FillKey]bool{}
	r.Exposures, r.Made, r.Marks = map[int64][]Exposure{}, map[NonceKey]Write{}, map[int64]Metrics{}
	r.unread, r.held, r.unreadHeld = nil, nil, nil
}

// versioned scans an account row followed by its balanceVersion.
type versioned struct {
	rows    *sql.Rows
	version *int64
}

func (v versioned) Scan(dest ...any) error { return v.rows.Scan(append(dest, v.version)...) }

// Expose moves account's exposure on symbol and side by volume (negative: a close), where the
// batch prices that account's fills.
func (r *Rows) Expose(account int64, symbol string, side fx.Side, volume, volumePrice decimal.Decimal) {
	exps, ok := r.Exposures[account]
	if !ok {
		return
	}
	for i := range exps {
		if exps[i].Symbol == symbol && exps[i].Side == side {
			exps[i].Volume = exps[i].Volume.Add(volume)
			exps[i].VolumePrice = exps[i].VolumePrice.Add(volumePrice)
			if !exps[i].Volume.IsPositive() {
				exps = slices.Delete(exps, i, i+1)
			}
			r.Exposures[account] = exps
			return
		}
	}
	if volume.IsPositive() {
		r.Exposures[account] = append(exps, Exposure{Symbol: symbol, Side: side, Volume: volume, VolumePrice: volumePrice})
	}
}

// OpenExposures is account's open exposures as the batch's writes so far left them, for a rule
// that needs them only now and then — negative balance protection, on the close that left an
// account below zero. When the batch did not read them (read false), it is planned again with
// them read and applied again from scratch, before anything is written: a rare rule costs a
// batch that meets it one more lock round trip, instead of costing every batch a read.
func (r *Rows) OpenExposures(account int64) (exps []Exposure, read bool) {
	exps, read = r.Exposures[account]
	if !read && !slices.Contains(r.unread, account) {
		r.unread = append(r.unread, account)
	}
	return exps, read
}

// Post adds d to the batch's ledger posting on the locked account a and moves a's balance, so
// the next write in the batch sees it. It returns the deal's index in the batch.
func (r *Rows) Post(a *Account, d Deal) int {
	d.AccountID, d.Amount = a.ID, fx.RoundMoney(a.Currency, d.Amount)
	a.Balance = a.Balance.Add(d.Amount)
	r.Deals = append(r.Deals, d)
	return len(r.Deals) - 1
}

// SessionVar names a new session variable, which the caller's statements set; the batch reads it
// back before COMMIT into ids.values at the index returned.
func (r *Rows) SessionVar(prefix string) (string, int) {
	r.vars++
	name := fmt.Sprintf("@fx_%s%d", prefix, r.vars)
	r.IDs.names = append(r.IDs.names, name)
	return name, len(r.IDs.names) - 1
}

// finish adds the ledger's posting of every deal of the batch (one balance UPDATE over every
// moved account, one INSERT of every deal), the marks of accounts a fill marked without moving
// their balance, and the read-back of the batch's ids.
func (r *Rows) finish() error {
	if len(r.Closed) > 0 {
		ps := make([]*Position, 0, len(r.closedOrder))
		for _, id := range r.closedOrder {
			ps = append(ps, r.Closed[id])
		}
		stmt, args := closeUpdate(ps)
		r.Writes.Exec(stmt, args...)
	}
	byID := map[int64]*ledger.Account{} // the accounts whose balance (and marks) the ledger writes
	if len(r.Deals) > 0 {
		var las []*ledger.Account
		for _, d := range r.Deals {
			if byID[d.AccountID] != nil {
				continue
			}
			la := &ledger.Account{ID: d.AccountID, Currency: r.Accounts[d.AccountID].Currency, Balance: r.locked[d.AccountID]}
			if mk, ok := r.Marks[d.AccountID]; ok {
				la.Marks = &ledger.Marks{Equity: mk.Equity, UsedMargin: mk.UsedMargin}
			}
			byID[d.AccountID] = la
			las = append(las, la)
		}
		p, err := ledger.Post(las, r.Deals)
		if err != nil {
			return err
		}
		for _, la := range las {
			if !la.Balance.Equal(r.Accounts[la.ID].Balance) {
				return fmt.Errorf("desk batch: account %d: the ledger's balance %s differs from the rules' %s", la.ID, la.Balance, r.Accounts[la.ID].Balance)
			}
		}
		for _, st := range p.Stmts {
			r.Writes.Exec(st.SQL, st.Args...)
		}
		r.posted = p.Deals
	}
	for _, id := range slices.Sorted(maps.Keys(r.Marks)) {
		if byID[id] != nil {
			continue // written with the balance
		}
		mk := r.Marks[id]
		r.Writes.Exec("UPDATE `fx_account` SET `equity` = ?, `usedMargin` = ?, `markedAt` = NOW(3) WHERE `id` = ?", mk.Equity, mk.UsedMargin, id)
	}
	if len(r.IDs.names) > 0 || len(r.Deals) > 0 {
		// The deal INSERT is the posting's last statement: LAST_INSERT_ID() is its first deal's
		// id, and the others follow auto_increment_increment apart (see ledger.Posting).
		r.IDs.Values = make([]int64, len(r.IDs.names))
		dest := []any{&r.IDs.firstDeal, &r.IDs.step}
		for i := range r.IDs.Values {
			dest = append(dest, &r.IDs.Values[i])
		}
		r.Writes.Query(ScanFirst(new(bool), func(rows *sql.Rows) error { return rows.Scan(dest...) }), readBackSQL(r.IDs.names))
	}
	return nil
}

// Index is the position of session variable name among those read back.
func (ids *IDs) Index(name string) int { return slices.Index(ids.names, name) }

// readBackSQL reads the batch's last insert id, the step between one INSERT's ids and the
// session variables names.
func readBackSQL(names []string) string {
	var sb strings.Builder
	sb.WriteString("SELECT LAST_INSERT_ID(), @@auto_increment_increment")
	for _, n := range names {
		sb.WriteString(", ")
		sb.WriteString(n)
	}
	return sb.String()
}

// SetVarSQL sets session variable name to expr: LAST_INSERT_ID() or a ? argument.
func SetVarSQL(name, expr string) string {
	var sb strings.Builder
	sb.WriteString("SET ")
	sb.WriteString(name)
	sb.WriteString(" = ")
	sb.WriteString(expr)
	return sb.String()
}

// DealAt is the batch's DealAt i as written, with its id.
func (r *Rows) DealAt(i int, ids *IDs) Deal {
	d := r.posted[i]
	d.ID = ids.firstDeal + int64(i)*ids.step
	d.CreatedAt = r.Now
	return d
}

// Closing marks locked position p as changed by a close of this batch.
func (r *Rows) Closing(p *Position) {
	if r.Closed == nil {
		r.Closed = map[int64]*Position{}
	}
	if _, ok := r.Closed[p.ID]; !ok {
		r.closedOrder = append(r.closedOrder, p.ID)
	}
	r.Closed[p.ID] = p
}

// closeUpdate is the one statement that writes a batch's closes: every position's volume and
// realized profit, and for the ones now closed their close price, status, reason and time. A
// burst's closes cost one statement per batch, not one per close; the index makes the UPDATE lock
// the positions it names and no other.
//
// A value every position of the statement shares is set plainly; otherwise the positions that
// share a value are named by one WHEN `id` IN (…), which the server searches by bisection, not
// a CASE branch per position, which it walks for every row and column: a gap's closes share their
// volume (0), status, reason, time and — per symbol — price, and only the profits are one branch
// per position.
func closeUpdate(ps []*Position) (string, []any) {
	if len(ps) == 1 {
		p := ps[0]
		if p.Status == fx.PositionClosed {
			return "UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ?, `closePrice` = ?, `status` = 'CLOSED', " +
				"`closeReason` = ?, `closedAt` = NOW(3) WHERE `id` = ?", []any{p.Volume, p.RealizedProfit, p.ClosePrice, p.CloseReason, p.ID}
		}
		return "UPDATE `fx_position` SET `volume` = ?, `realizedProfit` = ? WHERE `id` = ?", []any{p.Volume, p.RealizedProfit, p.ID}
	}
	var sb strings.Builder
	var args []any
	sb.WriteString("UPDATE `fx_position` FORCE INDEX (PRIMARY) SET ")
	first := true
	// column sets name to each position's value (expr, with arg when not nil), for the positions
	// value gives one (ok); positions with equal keys share a value ("" keys none: its own).
	type group struct {
		expr string
		arg  any
		ids  []any
	}
	column := func(name string, value func(*Position) (expr string, arg any, key string, ok bool)) {
		var groups []*group
		byKey := map[string]*group{}
		set := 0
		for _, p := range ps {
			expr, arg, key, ok := value(p)
			if !ok {
				continue
			}
			set++
			g := byKey[key]
			if g == nil || key == "" {
				g = &group{expr: expr, arg: arg}
				groups = append(groups, g)
				if key != "" {
					byKey[key] = g
				}
			}
			g.ids = append(g.ids, p.ID)
		}
		if set == 0 {
			return
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		sb.WriteString("`" + name + "` = ")
		if set == len(ps) && len(groups) == 1 {
			sb.WriteString(groups[0].expr)
			if groups[0].arg != nil {
				args = append(args, groups[0].arg)
			}
			return
		}
		sb.WriteString("CASE")
		for _, g := range groups {
			if len(g.ids) == 1 {
				sb.WriteString(" WHEN `id` = ? THEN ")
			} else {
				sb.WriteString(" WHEN `id` IN (" + store.Placeholders(len(g.ids)) + ") THEN ")
			}
			sb.WriteString(g.expr)
			args = append(args, g.ids...)
			if g.arg != nil {
				args = append(args, g.arg)
			}
		}
		sb.WriteString(" ELSE `" + name + "` END")
	}
	closed := func(p *Position) bool { return p.Status == fx.PositionClosed }
	decimalKey := func(d *decimal.Decimal) string {
		if d == nil {
			return "null"
		}
		return d.String()
	}
	column("volume", func(p *Position) (string, any, string, bool) {
		if p.Volume.IsZero() {
			return "0", nil, "0", true
		}
		return "?", p.Volume, "", true
	})
	column("realizedProfit", func(p *Position) (string, any, string, bool) { return "?", p.RealizedProfit, "", true })
	column("closePrice", func(p *Position) (string, any, string, bool) {
		return "?", p.ClosePrice, decimalKey(p.ClosePrice), closed(p)
	})
	column("status", func(p *Position) (string, any, string, bool) { return "'CLOSED'", nil, "closed", closed(p) })
	column("closeReason", func(p *Position) (string, any, string, bool) {
		if p.CloseReason == nil {
			return "NULL", nil, "null", closed(p)
		}
		return "?", *p.CloseReason, "reason:" + *p.CloseReason, closed(p)
	})
	column("closedAt", func(p *Position) (string, any, string, bool) { return "NOW(3)", nil, "now", closed(p) })
	sb.WriteString(" WHERE `id` IN (" + store.Placeholders(len(ps)) + ")")
	for _, p := range ps {
		args = append(args, p.ID)
	}
	return sb.String(), args
}
