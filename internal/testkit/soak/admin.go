package soak

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/testkit/soak/invariant"
)

// The admin lane: the desk's staff work beside the traders, through the web processes as they do
// (a follower forwards what only the holder serves), each action with the token of the role whose
// permission its route names (docs/identity.md, «Roles»): the risk desk edits two account groups
// of the lane's own (limits); the dealer moves traders' accounts between them and default
// (routing), sets and clears a symbol override (overrides) and closes traders' open positions
// (dealing); support makes an account CLOSE_ONLY and ACTIVE again (accounts.state); finance funds
// the thin accounts (money). Every admin write carries an X-Request-Id of its own, which the desk
// records on the change's audit row (the auditTrail invariant matches the two); a deposit retried
// under its nonce keeps its id.
//
// Two thin accounts stand in the gaps' way: 300 USD at 1:500 with 0.10 lots open on every soak
// symbol, so a gap of 3 % against one of them stops it out below zero. About half their symbols
// also hold 0.05 lots the other way: a hedged book, whose losing leg's close can leave the account
// below zero while the winning leg is still open. One is in a group with negative balance
// protection, which the desk must bring back to zero once nothing is left open, and never before;
// the other in one without, which keeps its negative balance (the negativeBalance invariant).

// The admin lane's account groups, created over the API before the load.
const (
	groupA    = "soak-a"    // INTERNAL, edited and moved into
	groupB    = "soak-b"    // INTERNAL, edited and moved into
	groupThin = "soak-thin" // the protected thin account's
	groupRaw  = "soak-raw"  // the unprotected thin account's

	// dealerABookClient sends the dealer's closes of EXTERNAL positions: the venue's 503 and 504
	// are allowed answers to them, as to an A-book trader.
	dealerABookClient = "dealer-abook"

	thinUser = 3001
)

// Admin operations, as the summary counts them.
const (
	adminGroupEdit   = "groupEdit"
	adminMove        = "move"
	adminOverride    = "override"
	adminState       = "state"
	adminDealerClose = "dealerClose"
	adminThinArm     = "thinArm"
)

var adminOps = []string{adminGroupEdit, adminMove, adminOverride, adminState, adminDealerClose, adminThinArm}

type adminLane struct {
	j *journal
	c *cluster
	// staff is the token of each staff role; each action is journaled under its role's name as
	// the client.
	staff map[auth.Role]string
	// traders are the load's clients, whose positions the dealer closes; movable the INTERNAL
	// ones, whose accounts it moves and restricts; thin the thin accounts' clients.
	traders, movable, thin []*trader
	external               map[string]bool

	mu     sync.Mutex
	rng    *rand.Rand
	seq    int
	counts *opCounts
	group  map[int64]string   // where each movable account is, as far as the lane knows
	modes  map[*trader]string // the mode traders and their NETTING or FIFO group (modes.go)
}

func (l *adminLane) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

func (l *adminLane) requestID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return fmt.Sprintf("soak-admin-%d", l.seq)
}

// anyWeb is a running web process: the holder serves the request, or a follower forwards it.
func (l *adminLane) anyWeb() *proc {
	var up []*proc
	for _, w := range l.c.live("web") {
		if !w.isStopped() {
			up = append(up, w)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[l.intN(len(up))]
}

// anyFollower is a running web process that does not hold the lease, or anyWeb when there is
// none: a change of terms made there reaches the holder's risk engine only through the audit log
// (catalog.TermsFollower), which is what moves and overrides should exercise.
func (l *adminLane) anyFollower(ctx context.Context) *proc {
	holder := l.c.holder(ctx)
	var up []*proc
	for _, w := range l.c.live("web") {
		if !w.isStopped() && w != holder {
			up = append(up, w)
		}
	}
	if len(up) == 0 {
		return l.anyWeb()
	}
	return up[l.intN(len(up))]
}

// send sends one admin write with role's token and a request id of its own, journaled under the
// role's name.
func (l *adminLane) send(ctx context.Context, p *proc, role auth.Role, op, method, path string, body any) invariant.Entry {
	return l.sendAs(ctx, p, role, string(role), op, method, path, body)
}

// sendAs is send journaled under client.
func (l *adminLane) sendAs(ctx context.Context, p *proc, role auth.Role, client, op, method, path string, body any) invariant.Entry {
	return l.j.callID(ctx, p, l.staff[role], client, op, method, path, l.requestID(), body)
}

// setup creates the lane's groups and the thin accounts, through web (the holder, before any
// fault), and funds the thin accounts.
func (l *adminLane) setup(ctx context.Context, web *proc, seed uint64) error {
	groups := []map[string]any{
		{"name": groupA, "leverageMax": 200},
		{"name": groupB, "leverageMax": 400, "stopOutLevel": "40", "marginCallLevel": "90"},
		{"name": groupThin, "negativeBalanceProtection": true},
		{"name": groupRaw, "negativeBalanceProtection": false},
	}
	for _, g := range groups {
		if e := l.send(ctx, web, auth.RoleRisk, "setup", http.MethodPost, "/api/admin/fx/account-groups", g); !e.OK() {
			return fmt.Errorf("create account group %s: %d %s", g["name"], e.Status, e.Resp)
		}
	}
	if err := l.setupModes(ctx, web); err != nil {
		return err
	}
	if err := l.routingRules(ctx, web); err != nil {
		return err
	}
	// One setting a request: each change is its own audit row, and the audit check counts one
	// row per request.
	for _, name := range slices.Sorted(maps.Keys(hedgeSettings)) {
		if e := l.send(ctx, web, auth.RoleDealer, "setup", http.MethodPut, "/api/admin/fx/settings", map[string]string{name: hedgeSettings[name]}); !e.OK() {
			return fmt.Errorf("the hedger's setting %s: %d %s", name, e.Status, e.Resp)
		}
	}
	tok, err := l.c.issueToken(ctx, thinUser, auth.RoleTrader)
	if err != nil {
		return err
	}
	for i, group := range []string{groupThin, groupRaw} {
		t := &trader{name: fmt.Sprintf("thin%d", i+1), user: thinUser, token: tok, j: l.j, c: l.c, holder: l.traders[0].holder,
			rng: rand.New(rand.NewPCG(seed, uint64(100+i))), positions: map[int64]decimal.Decimal{}}
		if err := t.openAccount(ctx, web, 500); err != nil {
			return err
		}
		if e := l.send(ctx, web, auth.RoleDealer, "setup", http.MethodPost, fmt.Sprintf("/api/admin/fx/accounts/%d/group", t.account), map[string]any{"group": group}); !e.OK() {
			return fmt.Errorf("move thin account %d into %s: %d %s", t.account, group, e.Status, e.Resp)
		}
		l.thin = append(l.thin, t)
	}
	return nil
}

// routingRules gives the groups the soak's traders trade in their routing rules, which never
// change during the run (the routing invariant judges each order by its account's group now): the
// A-book group keeps EURJPY on the desk, and every INTERNAL group an account moves between
// books its large orders on the desk and hedges half of each at the venue in the hedge book
// (HEDGE 50%, docs/routing.md «Hedge book»), under a rule of the same terms.
func (l *adminLane) routingRules(ctx context.Context, web *proc) error {
	rules := map[string]map[string]any{
		abookGroup: {"symbols": []string{"EURJPY"}, "action": "B_BOOK", "note": "soak: EURJPY stays on the desk"},
	}
	for _, g := range []string{"default", groupA, groupB} {
		rules[g] = map[string]any{"volumeMin": "0.90", "action": "HEDGE", "hedgePercent": 50, "note": "soak: large orders, half hedged"}
	}
	for _, g := range []string{abookGroup, "default", groupA, groupB} {
		if e := l.send(ctx, web, auth.RoleDealer, "setup", http.MethodPost, "/api/admin/fx/account-groups/"+g+"/routing", rules[g]); !e.OK() {
			return fmt.Errorf("routing rule of %s: %d %s", g, e.Status, e.Resp)
		}
	}
	return nil
}

// run is the lane until ctx ends: one admin action every 0.3–0.9 s, and the thin accounts armed
// again (funded, positions open) each second once a gap has closed them out.
func (l *adminLane) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, t := range l.thin {
				l.arm(ctx, t)
			}
			sleepCtx(ctx, time.Second)
		}
	})
	for ctx.Err() == nil {
		switch r := l.intN(100); {
		case r < 20:
			l.editGroup(ctx)
		case r < 35:
			l.move(ctx)
		case r < 47:
			l.override(ctx)
		case r < 57:
			l.toggleState(ctx)
		default:
			l.dealerClose(ctx)
		}
		sleepCtx(ctx, time.Duration(300+l.intN(600))*time.Millisecond)
	}
	wg.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// editGroup has the risk desk change one of the lane's groups' leverage cap and levels.
func (l *adminLane) editGroup(ctx context.Context) {
	path, body := groupEdit(l.intN)
	l.send(ctx, l.anyWeb(), auth.RoleRisk, adminGroupEdit, http.MethodPatch, path, body)
	l.counts.add(adminGroupEdit)
}

// groupEdit is a change of one of the lane's groups' leverage cap and levels, within their
// ranges, drawn with intN: its path and body.
func groupEdit(intN func(int) int) (string, map[string]any) {
	group := []string{groupA, groupB}[intN(2)]
	stopOut := 20 + intN(41)          // 20–60 %
	marginCall := stopOut + intN(101) // ≥ the stop-out level
	leverage := []int{100, 200, 300, 500}[intN(4)]
	return "/api/admin/fx/account-groups/" + group,
		map[string]any{"leverageMax": leverage, "marginCallLevel": fmt.Sprint(marginCall), "stopOutLevel": fmt.Sprint(stopOut)}
}

// move puts an INTERNAL trader's account, positions and all, into another INTERNAL group of
// other terms (default 1:500, soak-a 1:200 with its EURUSD and GBPUSD overrides, soak-b 1:400 and
// its own levels), through a follower when there is one.
func (l *adminLane) move(ctx context.Context) {
	if len(l.movable) == 0 {
		return
	}
	t := l.movable[l.intN(len(l.movable))]
	groups := []string{"default", groupA, groupB}
	l.mu.Lock()
	from := l.group[t.account]
	l.mu.Unlock()
	to := groups[l.intN(len(groups))]
	if to == from {
		to = groups[(indexOf(groups, to)+1)%len(groups)]
	}
	e := l.send(ctx, l.anyFollower(ctx), auth.RoleDealer, adminMove, http.MethodPost, fmt.Sprintf("/api/admin/fx/accounts/%d/group", t.account), map[string]any{"group": to})
	if e.OK() {
		l.mu.Lock()
		l.group[t.account] = to
		l.mu.Unlock()
	}
	l.counts.add(adminMove)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// override has the dealer set or clear one of soak-a's overrides, through a follower when there
// is one.
func (l *adminLane) override(ctx context.Context) {
	method, path, body := overrideChange(l.intN)
	l.send(ctx, l.anyFollower(ctx), auth.RoleDealer, adminOverride, method, path, body)
	l.counts.add(adminOverride)
}

// overrideChange is a setting (overrideSet) or, a third of the time, a clearing of soak-a's
// override on EURUSD or GBPUSD, drawn with intN: its method, path and body (none for a clearing,
// which answers 404 when there is nothing to clear).
func overrideChange(intN func(int) int) (string, string, any) {
	if intN(3) == 0 {
		return http.MethodDelete, overridePath(intN), nil
	}
	path, body := overrideSet(intN)
	return http.MethodPut, path, body
}

// overrideSet is a setting of soak-a's override on EURUSD or GBPUSD — its markup, commission and
// leverage cap, never its swaps (the swap price check computes them from the instrument) — drawn
// with intN: its path and body.
func overrideSet(intN func(int) int) (string, map[string]any) {
	return overridePath(intN), map[string]any{
		"markupPoints": fmt.Sprint(intN(20)), "commissionPerLot": fmt.Sprintf("%d.50", intN(5)), "commissionCurrency": "USD",
		"leverageMax": []int{50, 100, 200}[intN(3)]}
}

// overridePath is the path of soak-a's override on EURUSD or GBPUSD, drawn with intN.
func overridePath(intN func(int) int) string {
	return "/api/admin/fx/account-groups/" + groupA + "/overrides/symbols/" + []string{"EURUSD", "GBPUSD"}[intN(2)]
}

// toggleState makes an INTERNAL trader's account CLOSE_ONLY for a moment, then ACTIVE again
// (insisting: the load needs it back).
func (l *adminLane) toggleState(ctx context.Context) {
	if len(l.movable) == 0 {
		return
	}
	t := l.movable[l.intN(len(l.movable))]
	path := fmt.Sprintf("/api/admin/fx/accounts/%d/state", t.account)
	l.send(ctx, l.anyWeb(), auth.RoleSupport, adminState, http.MethodPut, path, map[string]any{"state": "CLOSE_ONLY", "reason": "soak: support review"})
	sleepCtx(ctx, time.Duration(200+l.intN(1000))*time.Millisecond)
	l.activate(context.WithoutCancel(ctx), t)
	l.counts.add(adminState)
}

// activate sets t's account ACTIVE until an answer says so, each attempt a request of its own
// (setting a state again writes another audit row).
func (l *adminLane) activate(ctx context.Context, t *trader) bool {
	path := fmt.Sprintf("/api/admin/fx/accounts/%d/state", t.account)
	for range 20 {
		if e := l.send(ctx, l.anyWeb(), auth.RoleSupport, adminState, http.MethodPut, path, map[string]any{"state": "ACTIVE"}); e.OK() {
			return true
		}
		time.Sleep(300 * time.Millisecond)
	}
	return false
}

// dealerClose closes all of a random known open position of the load's, or half of it.
func (l *adminLane) dealerClose(ctx context.Context) {
	t := l.traders[l.intN(len(l.traders))]
	id, vol, ok := t.pick()
	if !ok {
		return
	}
	var body map[string]any
	if l.intN(3) == 0 && vol.GreaterThan(decimal.New(1, -2)) {
		if half := vol.Div(decimal.NewFromInt(2)).RoundFloor(2); half.IsPositive() {
			body = map[string]any{"volume": half.String()}
		}
	}
	l.closeFor(ctx, t, id, body)
	l.counts.add(adminDealerClose)
}

// closeFor sends the dealer's close of t's position id, from the dealer's client of t's kind.
func (l *adminLane) closeFor(ctx context.Context, t *trader, id int64, body map[string]any) invariant.Entry {
	client := string(auth.RoleDealer)
	if l.external[t.name] {
		client = dealerABookClient
	}
	e := l.sendAs(ctx, l.anyWeb(), auth.RoleDealer, client, adminDealerClose, http.MethodPost, fmt.Sprintf("/api/admin/fx/positions/%d/close", id), body)
	t.noteClose(e, id)
	return e
}

// thinBalance and thinVolume are what a thin account is armed with: 0.10 lots at 1:500 use
// about 20 USD of margin each, and a 3 % gap against one costs about 300 USD. thinHedge is the
// opposite leg it holds on about half the symbols: a gap against the 0.10 lots then costs half as
// much, and stops the account out from about 6 %.
var (
	thinBalance = decimal.NewFromInt(300)
	thinVolume  = "0.10"
	thinHedge   = "0.05"
)

// arm funds thin account t back to 300 USD and opens 0.10 lots on every soak symbol, each side
// at random, and on about half of them 0.05 lots the other way, once it holds no position.
func (l *adminLane) arm(ctx context.Context, t *trader) {
	t.refresh(ctx)
	t.mu.Lock()
	n := len(t.positions)
	t.mu.Unlock()
	if n > 0 || ctx.Err() != nil {
		return
	}
	e := t.j.call(ctx, t.anyWeb(), t.token, t.name, "account", http.MethodGet, fmt.Sprintf("/api/fx/accounts/%d", t.account), nil)
	var b struct {
		Account struct {
			Balance string `json:"balance"`
		} `json:"account"`
	}
	if !e.OK() || !e.Decode(&b) {
		return
	}
	balance, err := decimal.NewFromString(b.Account.Balance)
	if err != nil {
		return
	}
	if balance.LessThan(thinBalance.Sub(decimal.NewFromInt(50))) {
		if e := t.depositOf(ctx, l.staff[auth.RoleFinance], thinBalance.Sub(balance)); !e.OK() {
			return
		}
	}
	for _, s := range soakSymbols {
		side, other := "BUY", "SELL"
		if t.intN(2) == 1 {
			side, other = other, side
		}
		t.openThin(ctx, s.symbol, side, thinVolume)
		if t.intN(2) == 1 {
			t.openThin(ctx, s.symbol, other, thinHedge)
		}
	}
	l.counts.add(adminThinArm)
}

// openThin opens volume lots of symbol on thin account t and notes the position.
func (t *trader) openThin(ctx context.Context, symbol, side, volume string) {
	t.place(ctx, map[string]any{"accountId": t.account, "symbol": symbol, "side": side, "type": "MARKET", "volume": volume})
}

// finish runs after the load: every restricted account ACTIVE again, and the thin accounts'
// positions closed by the dealer, so each ends settled (a protected one at zero or above).
func (l *adminLane) finish(ctx context.Context) {
	for _, t := range l.movable {
		l.activate(ctx, t)
	}
	for _, t := range l.thin {
		for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
			t.refresh(ctx)
			t.mu.Lock()
			ids := make([]int64, 0, len(t.positions))
			for id := range t.positions {
				ids = append(ids, id)
			}
			t.mu.Unlock()
			if len(ids) == 0 {
				break
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			for _, id := range ids {
				l.closeFor(ctx, t, id, nil)
				l.counts.add(adminDealerClose)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
}
