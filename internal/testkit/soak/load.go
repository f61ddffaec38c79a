package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/testkit/soak/invariant"
)

// soakSymbols are what the traders trade: two USD-quoted majors and two JPY-quoted pairs, whose
// swaps convert to the USD accounts through USDJPY — the conversion the mirror check reads.
var soakSymbols = []struct {
	symbol string
	digits int32
}{{"EURUSD", 5}, {"GBPUSD", 5}, {"USDJPY", 3}, {"EURJPY", 3}}

// trader is one concurrent client: one platform user with one USD account.
type trader struct {
	name    string
	user    int64
	token   string
	account int64
	rng     *rand.Rand
	j       *journal
	c       *cluster
	holder  func() *proc

	mu        sync.Mutex
	positions map[int64]decimal.Decimal // open positions this client knows of, by id → volume
	nonces    int
}

// openAccount opens the trader's USD account at leverage through p and notes its id.
func (t *trader) openAccount(ctx context.Context, p *proc, leverage int) error {
	e := t.j.call(ctx, p, t.token, t.name, "account", http.MethodPost, "/api/fx/accounts", map[string]any{"currency": "USD", "leverage": leverage})
	var b struct {
		Account struct {
			ID int64 `json:"id"`
		} `json:"account"`
	}
	if !e.OK() || !e.Decode(&b) {
		return fmt.Errorf("create %s's account: %d %s", t.name, e.Status, e.Resp)
	}
	t.account = b.Account.ID
	return nil
}

// intN and float draw from the trader's generator; a burst of fills shares it with the loop.
func (t *trader) intN(n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.IntN(n)
}

func (t *trader) float() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rng.Float64()
}

// anyWeb is a live, running web process, for what every process serves from the database.
func (t *trader) anyWeb() *proc {
	webs := t.c.live("web")
	var up []*proc
	for _, w := range webs {
		if !w.isStopped() {
			up = append(up, w)
		}
	}
	if len(up) == 0 {
		return nil
	}
	return up[t.intN(len(up))]
}

// deskWeb is where desk-priced work goes: the holder when one is known, else any web (which
// answers the pricing 503 — an allowed answer).
func (t *trader) deskWeb() *proc {
	if h := t.holder(); h != nil {
		return h
	}
	return t.anyWeb()
}

func (t *trader) nonce(kind string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nonces++
	return fmt.Sprintf("%s-%s-%d", t.name, kind, t.nonces)
}

// callRetrying sends a request carrying a requestNonce and, while its outcome is unknown (no
// answer, or the desk's 504 outcome_unknown), sends it again with the same nonce (up to three
// times), as a client after a timeout would.
func (t *trader) callRetrying(ctx context.Context, op, path, nonce string, body map[string]any, target func() *proc) invariant.Entry {
	var e invariant.Entry
	for attempt := 0; attempt < 4; attempt++ {
		name := op
		if attempt > 0 {
			name = op + "-retry"
		}
		e = t.j.call(ctx, target(), t.token, t.name, name, http.MethodPost, path, body)
		if (e.Outcome == invariant.Answered && e.Status != http.StatusGatewayTimeout) || ctx.Err() != nil {
			return e
		}
		time.Sleep(time.Duration(200+t.intN(300)) * time.Millisecond)
	}
	return e
}

type quote struct {
	Bid, Ask float64
}

func (t *trader) quote(ctx context.Context, p *proc, symbol string) (quote, bool) {
	e := t.j.call(ctx, p, t.token, t.name, "quote", http.MethodGet, "/api/fx/quotes?symbols="+symbol, nil)
	var b struct {
		Quotes []struct {
			Bid *string `json:"bid"`
			Ask *string `json:"ask"`
		} `json:"quotes"`
	}
	if !e.OK() || !e.Decode(&b) || len(b.Quotes) != 1 || b.Quotes[0].Bid == nil || b.Quotes[0].Ask == nil {
		return quote{}, false
	}
	bid, err1 := strconv.ParseFloat(*b.Quotes[0].Bid, 64)
	ask, err2 := strconv.ParseFloat(*b.Quotes[0].Ask, 64)
	return quote{bid, ask}, err1 == nil && err2 == nil && bid > 0
}

func priceText(v float64, digits int32) string {
	return decimal.NewFromFloat(v).Round(digits).String()
}

// open places a market order, with SL and TP half the time when stops.
func (t *trader) open(ctx context.Context, stops bool) {
	s := soakSymbols[t.intN(len(soakSymbols))]
	side := "BUY"
	if t.intN(2) == 1 {
		side = "SELL"
	}
	vol := decimal.New(int64(5+t.intN(96)), -2) // 0.05 … 1.00 lots
	body := map[string]any{"accountId": t.account, "symbol": s.symbol, "side": side, "type": "MARKET",
		"volume": vol.String()}
	p := t.deskWeb()
	if stops && t.intN(2) == 0 {
		if q, ok := t.quote(ctx, p, s.symbol); ok {
			d1, d2 := 0.002+t.float()*0.008, 0.002+t.float()*0.008
			if side == "BUY" {
				body["sl"], body["tp"] = priceText(q.Bid*(1-d1), s.digits), priceText(q.Ask*(1+d2), s.digits)
			} else {
				body["sl"], body["tp"] = priceText(q.Ask*(1+d1), s.digits), priceText(q.Bid*(1-d2), s.digits)
			}
		}
	}
	t.place(ctx, body)
}

// place sends order body under a new request nonce (asked again while its outcome is unknown)
// and notes the position a fill opened.
func (t *trader) place(ctx context.Context, body map[string]any) {
	nonce := t.nonce("order")
	body["requestNonce"] = nonce
	e := t.callRetrying(ctx, "open", "/api/fx/orders", nonce, body, t.deskWeb)
	var b struct {
		Position *struct {
			ID     int64  `json:"id"`
			Volume string `json:"volume"`
		} `json:"position"`
	}
	if e.OK() && e.Decode(&b) && b.Position != nil {
		v, _ := decimal.NewFromString(b.Position.Volume)
		t.mu.Lock()
		t.positions[b.Position.ID] = v
		t.mu.Unlock()
	}
}

// pick returns one known open position.
func (t *trader) pick() (int64, decimal.Decimal, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.positions) == 0 {
		return 0, decimal.Zero, false
	}
	n := t.rng.IntN(len(t.positions))
	for id, v := range t.positions {
		if n == 0 {
			return id, v, true
		}
		n--
	}
	return 0, decimal.Zero, false
}

func (t *trader) noteClose(e invariant.Entry, id int64) {
	var b struct {
		Position struct {
			Volume string `json:"volume"`
			Status string `json:"status"`
		} `json:"position"`
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case e.OK() && e.Decode(&b):
		v, _ := decimal.NewFromString(b.Position.Volume)
		if b.Position.Status == "CLOSED" || v.IsZero() {
			delete(t.positions, id)
		} else {
			t.positions[id] = v
		}
	case e.Outcome == invariant.Answered && (e.Status == http.StatusNotFound || e.Status == http.StatusConflict):
		delete(t.positions, id) // closed already: by a stop, by the other half of a race
	}
}

// closePos closes all of a position, or part of it when partial.
func (t *trader) closePos(ctx context.Context, partial bool) {
	id, vol, ok := t.pick()
	if !ok {
		return
	}
	var body map[string]any
	op := "close"
	if partial && vol.GreaterThan(decimal.New(1, -2)) {
		half := vol.Div(decimal.NewFromInt(2)).RoundFloor(2)
		if half.IsPositive() {
			body, op = map[string]any{"volume": half.String()}, "partialClose"
		}
	}
	e := t.j.call(ctx, t.deskWeb(), t.token, t.name, op, http.MethodPost, fmt.Sprintf("/api/fx/positions/%d/close", id), body)
	t.noteClose(e, id)
}

// raceClose sends two full closes of one position at once: exactly one may close it.
func (t *trader) raceClose(ctx context.Context) {
	id, _, ok := t.pick()
	if !ok {
		return
	}
	p := t.deskWeb()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			e := t.j.call(ctx, p, t.token, t.name, "raceClose", http.MethodPost, fmt.Sprintf("/api/fx/positions/%d/close", id), nil)
			t.noteClose(e, id)
		})
	}
	wg.Wait()
}

func (t *trader) withdraw(ctx context.Context) {
	nonce := t.nonce("wd")
	amount := decimal.New(int64(100+t.intN(5000)), -2) // 1.00 … 50.99
	t.callRetrying(ctx, "withdraw", fmt.Sprintf("/api/fx/accounts/%d/withdraw", t.account), nonce,
		map[string]any{"amount": amount.String(), "requestNonce": nonce}, t.deskWeb)
}

func (t *trader) deposit(ctx context.Context, finance string) {
	t.depositOf(ctx, finance, decimal.New(int64(1000+t.intN(100000)), -2))
}

// depositOf has finance (a finance role's token: deposits need the money permission) deposit
// amount into the trader's account, sent again under its nonce while its outcome is unknown; it
// returns the last answer. Above the four-eyes threshold the desk answers 202 with a money
// request, which the second finance user then approves: the approval's answer is returned.
func (t *trader) depositOf(ctx context.Context, finance string, amount decimal.Decimal) invariant.Entry {
	nonce := t.nonce("dep")
	body := map[string]any{"amount": amount.String(), "requestNonce": nonce}
	path := fmt.Sprintf("/api/admin/fx/accounts/%d/deposit", t.account)
	var e invariant.Entry
	for attempt := 0; attempt < 4; attempt++ {
		op := "deposit"
		if attempt > 0 {
			op = "deposit-retry"
		}
		// Every attempt carries one request id: the one that does it records it on its audit
		// row, a replay by the nonce records nothing.
		e = t.j.callID(ctx, t.anyWeb(), finance, t.name, op, http.MethodPost, path, "soak-"+nonce, body)
		if (e.Outcome == invariant.Answered && e.Status != http.StatusGatewayTimeout) || ctx.Err() != nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	var asked struct {
		MoneyRequest *struct {
			ID int64 `json:"id"`
		} `json:"moneyRequest"`
	}
	if e.Status != http.StatusAccepted || !e.Decode(&asked) || asked.MoneyRequest == nil {
		return e
	}
	return t.approve(ctx, asked.MoneyRequest.ID)
}

// approve has the second finance user approve money request id, sent again while its outcome is
// unknown (an approval sent again answers the first one's deal, and records nothing more: every
// attempt carries one request id); it returns the last answer.
func (t *trader) approve(ctx context.Context, id int64) invariant.Entry {
	path := fmt.Sprintf("/api/admin/fx/money-requests/%d/approve", id)
	var e invariant.Entry
	for attempt := 0; attempt < 4; attempt++ {
		e = t.j.callID(ctx, t.anyWeb(), t.c.approver, t.name, "approve", http.MethodPost, path, fmt.Sprintf("soak-approve-%d", id), nil)
		if (e.Outcome == invariant.Answered && e.Status != http.StatusGatewayTimeout) || ctx.Err() != nil {
			return e
		}
		time.Sleep(300 * time.Millisecond)
	}
	return e
}

// refresh re-reads the account's open positions (stops close them behind the client's back).
func (t *trader) refresh(ctx context.Context) {
	e := t.j.call(ctx, t.anyWeb(), t.token, t.name, "positions", http.MethodGet,
		fmt.Sprintf("/api/fx/positions?accountId=%d&status=OPEN&limit=500", t.account), nil)
	var b struct {
		Positions []struct {
			ID     int64  `json:"id"`
			Volume string `json:"volume"`
		} `json:"positions"`
	}
	if !e.OK() || !e.Decode(&b) {
		return
	}
	m := map[int64]decimal.Decimal{}
	for _, p := range b.Positions {
		v, _ := decimal.NewFromString(p.Volume)
		m[p.ID] = v
	}
	t.mu.Lock()
	t.positions = m
	t.mu.Unlock()
}

// run is the client's loop until ctx ends; finance is the token its deposits are made with.
func (t *trader) run(ctx context.Context, finance string) {
	for i := 0; ctx.Err() == nil; i++ {
		switch r := t.intN(100); {
		case r < 45:
			t.open(ctx, true)
		case r < 58:
			t.closePos(ctx, true)
		case r < 70:
			t.closePos(ctx, false)
		case r < 77:
			t.raceClose(ctx)
		case r < 85:
			t.withdraw(ctx)
		case r < 92:
			t.deposit(ctx, finance)
		case r < 97:
			t.orderAction(ctx)
		default:
			t.refresh(ctx)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(30+t.intN(150)) * time.Millisecond):
		}
	}
}

// burstEvery paces a burst's opens: 25 a second, which with the trader's own loop (about 10 a
// second) stays inside the front door's 50 a second per token (FXDESK_RATE_PER_TOKEN) even when
// every answer is an instant refusal — a halted market, no holder — as the price lane's faults
// make them (loadNotLimited, seeds 91412 and 670358855: back-to-back opens answered at once
// outran the limit).
const burstEvery = 40 * time.Millisecond

// burst opens positions, paced by burstEvery, until ctx ends: the fills a rollover run races.
func (t *trader) burst(ctx context.Context) {
	tick := time.NewTicker(burstEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		t.open(ctx, false)
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
}
