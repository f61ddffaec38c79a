package trading

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/risk"
	"fxdesk/internal/testkit/gatetest"
	"fxdesk/internal/tick"
)

// sessionPrices quotes fixed prices under a session state the test sets.
type sessionPrices struct {
	fixedPrices
	mu     sync.Mutex
	states map[string]tick.State
}

func (p *sessionPrices) SymbolState(s string) tick.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.states[s]; ok {
		return st
	}
	return p.fixedPrices.SymbolState(s)
}

func (p *sessionPrices) set(s string, st tick.State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.states[s] = st
}

// The risk engine's executor refuses a close for market state — a closed market, a symbol not
// quoting, a HALTED instrument — with an error the engine recognises (risk.ErrMarketUnavailable:
// pass the position over, try the next loser), while the client still sees its 409 or 503.
// Any other refusal, and a commit, is not market state.
func TestRiskCloseRefusedForMarketState(t *testing.T) {
	ctx := context.Background()
	prices := &sessionPrices{fixedPrices: fixedPrices{"XAGUSD": {24.100, 24.130}}, states: map[string]tick.State{}}
	svc := newService(t, Config{DB: testDB, Prices: prices, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	rd := NewRiskDesk(svc, nil)
	a := fundedAccount(t, svc, 9301)
	open := func() int64 {
		t.Helper()
		r, err := svc.PlaceOrder(ctx, 9301, OrderRequest{AccountID: a.ID, Symbol: "XAGUSD", Side: fx.Buy, Type: fx.Market, Volume: decimal.RequireFromString("0.01")})
		if err != nil {
			t.Fatal(err)
		}
		return r.Position.ID
	}
	id := open()

	for _, tc := range []struct {
		state tick.State
		code  string
	}{{tick.MarketClosed, fx.ECONFLICT}, {tick.QuotingHalted, fx.EUNAVAILABLE}} {
		prices.set("XAGUSD", tc.state)
		err := rd.Close(ctx, id, a.ID, fx.CloseStopOut, tick.Quote{})
		if !errors.Is(err, risk.ErrMarketUnavailable) || fx.ErrorCode(err) != tc.code {
			t.Fatalf("close on %s: %v (code %s), want market state and %s", tc.state, err, fx.ErrorCode(err), tc.code)
		}
	}
	prices.set("XAGUSD", tick.Quoting)

	status := fx.InstrumentHalted
	if _, err := adminOf(t, svc).PutInstruments(asAdmin(ctx), []catalog.InstrumentPatch{{Symbol: "XAGUSD", Status: &status}}); err != nil {
		t.Fatal(err)
	}
	err := rd.Close(ctx, id, a.ID, fx.CloseStopOut, tick.Quote{})
	active := fx.InstrumentActive
	if _, perr := adminOf(t, svc).PutInstruments(asAdmin(ctx), []catalog.InstrumentPatch{{Symbol: "XAGUSD", Status: &active}}); perr != nil {
		t.Fatal(perr)
	}
	if !errors.Is(err, risk.ErrMarketUnavailable) || fx.ErrorCode(err) != fx.ECONFLICT {
		t.Fatalf("close on a halted instrument: %v, want market state and ECONFLICT", err)
	}

	// The engine names the position's account and the batch locks it without reading the
	// position first: a close naming another account is refused and leaves the position open.
	other := fundedAccount(t, svc, 9302)
	if err := rd.Close(ctx, id, other.ID, fx.CloseStopOut, tick.Quote{}); fx.ErrorCode(err) != fx.ENOTFOUND {
		t.Fatalf("close naming another account: %v, want ENOTFOUND", err)
	}
	if err := rd.Close(ctx, id, a.ID, fx.CloseStopOut, tick.Quote{}); err != nil {
		t.Fatalf("close on an open market: %v", err)
	}
	err = rd.Close(ctx, id, a.ID, fx.CloseStopOut, tick.Quote{})
	if errors.Is(err, risk.ErrMarketUnavailable) || !errors.Is(err, risk.ErrAlreadyClosed) {
		t.Fatalf("second close: %v, want already closed and not market state", err)
	}
}
