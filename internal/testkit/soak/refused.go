package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/testkit/soak/invariant"
)

// The refused-request lane: beside the load, a request every 0.3–0.8 s the desk must refuse, each
// with a request id of its own and journaled under an op the refusedChangedNothing invariant
// reads. Staff tokens — the admin lane's own, one per role — call routes outside their role's
// permissions; a trader's token with the read scope alone places an order on, closes a position
// of and withdraws from its own account, which no other client uses and which holds one small
// position a full token of the same trader opened at setup. An expiring token (a dealer's) is used
// from setup on and past its expiry; a revoked one (the risk desk's) is used on every web process
// at setup and through the load, revoked through `fxdesk-web token revoke --id N` a seeded moment
// into the load, and used on past auth.CacheFor. Both send what their role may do (an override, a
// group edit): before their bound it is done, after it nothing may be.

// The lane's platform users; each of the last two holds one token, found by its user.
const (
	readOnlyUser = 3002 // the read-only trader
	expiringUser = 3003 // a dealer whose token expires
	revokedUser  = 3004 // a risk officer whose token is revoked
)

// expiringFor is how long the expiring token lives: issued last before the load, it expires a few
// seconds into it.
const expiringFor = 8 * time.Second

// Refused requests, as the summary counts them.
const (
	refusedPermission = "permission" // a staff role without the route's permission
	refusedScope      = "scope"      // a token without the route's scope
	refusedExpired    = "expired"    // the expiring token, before and after its expiry
	refusedRevoked    = "revoked"    // the revoked token, before and after its revocation
)

var refusedKinds = []string{refusedPermission, refusedScope, refusedExpired, refusedRevoked}

// refusal is one request a token must be refused: sent with token as client, lacking need (the
// refusal's own words: "money permission", "trade scope"); request draws its method, path and
// body (nil: none) for the request id it goes with.
type refusal struct {
	client, token, need string
	request             func(requestID string) (method, path string, body any)
}

type refusedLane struct {
	j *journal
	c *cluster
	// readOnly is the read-only trader, its token the read-scoped one; its one position is the
	// one the viewer and the read-only token try to close.
	readOnly *trader
	position int64
	// expiring and revoked are the two tokens used past their bound; revokeAfter is how long
	// into the load the revoked one is revoked.
	expiring, revoked string
	revokeAfter       time.Duration
	// ownRequest is a money request the finance user asked for and nobody approves: the same user
	// tries to approve it, which four eyes refuses.
	ownRequest int64

	mu        sync.Mutex
	rng       *rand.Rand
	seq, next int
	counts    *opCounts
	state     *invariant.Refusals // nil until set up
}

func newRefusedLane(j *journal, c *cluster, seed uint64) *refusedLane {
	rng := rand.New(rand.NewPCG(seed, 0x4e3))
	return &refusedLane{j: j, c: c, rng: rng, counts: newOpCounts(refusedKinds), revokeAfter: time.Duration(6000+rng.IntN(10000)) * time.Millisecond}
}

func (l *refusedLane) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rng.IntN(n)
}

func (l *refusedLane) requestID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	return fmt.Sprintf("soak-refused-%d", l.seq)
}

// describe says, for the run log, when the lane's two tokens meet their bound.
func (l *refusedLane) describe() string {
	st := l.evidence()
	return fmt.Sprintf("read-only account %d; the expiring token expires at %s; the revoked one is revoked %s into the load",
		st.ReadOnlyAccount, invariant.TimeOfDay(st.Expires), l.revokeAfter)
}

// evidence is what the lane knows for the checks (nil before its setup).
func (l *refusedLane) evidence() *invariant.Refusals {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		return nil
	}
	st := *l.state
	return &st
}

// web is a running web process, each in turn: the lane's tokens meet every process's cache.
func (l *refusedLane) web() *proc {
	var up []*proc
	for _, w := range l.c.live("web") {
		if !w.isStopped() {
			up = append(up, w)
		}
	}
	if len(up) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	return up[l.next%len(up)]
}

// setup, through web (the holder, before any fault): the read-only trader's account, funded by
// finance, with one position its full token opens; its read-scoped token; the revoked token, used
// on every web process; the expiring token, used once; and what the read-only account holds now.
func (l *refusedLane) setup(ctx context.Context, web *proc, holder func() *proc, seed uint64) error {
	full, err := l.c.issueToken(ctx, readOnlyUser, auth.RoleTrader)
	if err != nil {
		return err
	}
	ro := &trader{name: "readonly", user: readOnlyUser, token: full, j: l.j, c: l.c, holder: holder,
		rng: rand.New(rand.NewPCG(seed, 0x4e4)), positions: map[int64]decimal.Decimal{}}
	if err := ro.openAccount(ctx, web, 100); err != nil {
		return err
	}
	if e := ro.depositOf(ctx, l.c.staff[auth.RoleFinance], decimal.NewFromInt(10000)); !e.OK() {
		return fmt.Errorf("fund the read-only trader's account: %d %s", e.Status, e.Resp)
	}
	// 0.01 lots on 10,000 USD: no gap stops it out, so only a request can touch the account.
	ro.place(ctx, map[string]any{"accountId": ro.account, "symbol": "EURUSD", "side": "BUY", "type": "MARKET", "volume": "0.01"})
	id, _, ok := ro.pick()
	if !ok {
		return fmt.Errorf("the read-only trader's position did not open (journal.jsonl, client %s)", ro.name)
	}
	if ro.token, err = l.c.issueToken(ctx, readOnlyUser, auth.RoleTrader, "--scopes", "read"); err != nil {
		return err
	}
	// Above the four-eyes threshold: a money request that stays PENDING, the deal it would make
	// never made (the read-only account's deals stay as they were).
	ask := l.j.callID(ctx, web, l.c.staff[auth.RoleFinance], "refused-setup", "deposit", http.MethodPost,
		fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", ro.account), "soak-refused-ask", map[string]any{"amount": "50000.00", "requestNonce": "refused-ask"})
	var asked struct {
		MoneyRequest *struct {
			ID int64 `json:"id"`
		} `json:"moneyRequest"`
	}
	if ask.Status != http.StatusAccepted || !ask.Decode(&asked) || asked.MoneyRequest == nil {
		return fmt.Errorf("the money request the finance user tries to approve itself: %d %s", ask.Status, ask.Resp)
	}
	l.ownRequest = asked.MoneyRequest.ID
	l.readOnly, l.position = ro, id

	if l.revoked, err = l.c.issueToken(ctx, revokedUser, auth.RoleRisk); err != nil {
		return err
	}
	for _, w := range l.c.live("web") {
		if e := l.useRevoked(ctx, w); !e.OK() {
			return fmt.Errorf("the token to revoke, before its revocation, on %s: %d %s", w.name, e.Status, e.Resp)
		}
	}
	if l.expiring, err = l.c.issueToken(ctx, expiringUser, auth.RoleDealer, "--expires", expiringFor.String()); err != nil {
		return err
	}
	tok, err := l.c.tokenOf(ctx, expiringUser)
	if err != nil {
		return err
	}
	if tok.ExpiresAt == nil {
		return fmt.Errorf("the expiring token (id %d) has no expiresAt", tok.ID)
	}
	// A setting always succeeds; a clearing finds nothing to clear as often as not.
	path, body := overrideSet(l.intN)
	if e := l.sendExpiring(ctx, web, http.MethodPut, path, body); !e.OK() {
		return fmt.Errorf("the expiring token, before its expiry at %s: %d %s", invariant.TimeOfDay(*tok.ExpiresAt), e.Status, e.Resp)
	}
	s, err := invariant.ReadSnapshot(ctx, l.c.direct, l.c.scope)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.state = &invariant.Refusals{Expires: *tok.ExpiresAt, ReadOnlyAccount: ro.account, Before: invariant.Activity(s, ro.account)}
	l.mu.Unlock()
	return nil
}

// refusals are the requests the lane sends that a role or a scope must refuse.
func (l *refusedLane) refusals() []refusal {
	ro := l.readOnly
	account := fmt.Sprintf("/api/admin/fx/accounts/%d", ro.account)
	fixed := func(method, path string, body func(id string) map[string]any) func(string) (string, string, any) {
		return func(id string) (string, string, any) {
			if body == nil {
				return method, path, nil
			}
			return method, path, body(id)
		}
	}
	amount := func(id string) map[string]any { return map[string]any{"amount": "1.00", "requestNonce": id} }
	order := func(id string) map[string]any {
		return map[string]any{"accountId": ro.account, "symbol": "EURUSD", "side": "SELL", "type": "MARKET", "volume": "0.01", "requestNonce": id}
	}
	var out []refusal
	as := func(role auth.Role, need string, request func(string) (string, string, any)) {
		out = append(out, refusal{client: "refused-" + string(role), token: l.c.staff[role], need: need, request: request})
	}
	as(auth.RoleSupport, "money permission", fixed(http.MethodPost, account+"/deposit", amount))
	as(auth.RoleSupport, "overrides permission", func(string) (string, string, any) { return overrideChange(l.intN) })
	as(auth.RoleViewer, "dealing permission", fixed(http.MethodPost, fmt.Sprintf("/api/admin/fx/positions/%d/close", l.position), nil))
	as(auth.RoleFinance, "limits permission", func(string) (string, string, any) {
		path, body := groupEdit(l.intN)
		return http.MethodPatch, path, body
	})
	// The cap as it stands: were the refusal to fail, the desk would not change.
	as(auth.RoleDealer, "limits permission", fixed(http.MethodPut, "/api/admin/fx/settings", func(string) map[string]any {
		return map[string]any{catalog.SettingMaxAccountsPerUser: fmt.Sprint(catalog.DefaultMaxAccountsPerUser)}
	}))
	as(auth.RoleDealer, "trade scope", fixed(http.MethodPost, "/api/fx/orders", order))
	as(auth.RoleFinance, invariant.FourEyes, fixed(http.MethodPost, fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", l.ownRequest), nil))
	as(auth.RoleRisk, "routing permission", fixed(http.MethodPost, account+"/group", func(string) map[string]any { return map[string]any{"group": "default"} }))
	for _, q := range []struct {
		need    string
		request func(string) (string, string, any)
	}{
		{"trade scope", fixed(http.MethodPost, "/api/fx/orders", order)},
		{"trade scope", fixed(http.MethodPost, fmt.Sprintf("/api/fx/positions/%d/close", l.position), nil)},
		{"trade scope", fixed(http.MethodPost, fmt.Sprintf("/api/fx/accounts/%d/withdraw", ro.account), amount)},
		{"read permission", fixed(http.MethodGet, "/api/admin/fx/accounts", nil)},
	} {
		out = append(out, refusal{client: "refused-" + ro.name, token: ro.token, need: q.need, request: q.request})
	}
	return out
}

// run is the lane until ctx ends; start is when the load began.
func (l *refusedLane) run(ctx context.Context, start time.Time) {
	revokeAt := start.Add(l.revokeAfter)
	refusals := l.refusals()
	revoked := false
	for ctx.Err() == nil {
		if !revoked && !time.Now().Before(revokeAt) {
			// Every running process resolves the token right before its revocation, so each may
			// hold it cached: from auth.CacheFor after it, that cache must not answer.
			for _, w := range l.c.live("web") {
				if !w.isStopped() {
					l.useRevoked(ctx, w)
				}
			}
			at, err := l.c.revokeToken(ctx, revokedUser)
			if err != nil {
				return // only the end of the load stops the revocation
			}
			l.mu.Lock()
			l.state.Revoked = at
			l.mu.Unlock()
			revoked = true
		}
		switch r := l.intN(10); {
		case r < 6:
			l.refuse(ctx, refusals[l.intN(len(refusals))])
		case r < 8:
			l.useExpiring(ctx, l.web())
		default:
			l.useRevoked(ctx, l.web())
		}
		sleepCtx(ctx, time.Duration(300+l.intN(500))*time.Millisecond)
	}
}

// refuse sends refusal q to a running web process.
func (l *refusedLane) refuse(ctx context.Context, q refusal) {
	id := l.requestID()
	method, path, body := q.request(id)
	l.j.callID(ctx, l.web(), q.token, q.client, invariant.OpRefused+q.need, method, path, id, body)
	if strings.HasSuffix(q.need, " scope") {
		l.counts.add(refusedScope)
	} else {
		l.counts.add(refusedPermission)
	}
}

// useExpiring sends the expiring dealer's token's override change to p.
func (l *refusedLane) useExpiring(ctx context.Context, p *proc) invariant.Entry {
	method, path, body := overrideChange(l.intN)
	return l.sendExpiring(ctx, p, method, path, body)
}

// sendExpiring sends one request with the expiring token to p.
func (l *refusedLane) sendExpiring(ctx context.Context, p *proc, method, path string, body any) invariant.Entry {
	l.counts.add(refusedExpired)
	return l.j.callID(ctx, p, l.expiring, "expiring", invariant.OpExpiredToken, method, path, l.requestID(), body)
}

// useRevoked sends the revoked risk officer's token's group edit to p.
func (l *refusedLane) useRevoked(ctx context.Context, p *proc) invariant.Entry {
	path, body := groupEdit(l.intN)
	l.counts.add(refusedRevoked)
	return l.j.callID(ctx, p, l.revoked, "revoked", invariant.OpRevokedToken, http.MethodPatch, path, l.requestID(), body)
}
