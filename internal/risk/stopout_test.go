package risk

import (
	"context"
	"fmt"
	"math"
	"testing"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// Stop-out closes the largest loser that can be closed now (docs/architecture.md, «The risk
// engine»): a USD account, leverage 100, balance 1,000, long XAUUSD 0.2 from 2000.00 and EURUSD 0.3
// from 1.1002.
func stopOutDesk() Snapshot {
	ins := append(instruments(), Instrument{Symbol: "XAUUSD", Base: "XAU", Quote: "USD", ContractSize: 100, LeverageMax: 500})
	acc := Account{ID: 7, Currency: "USD", Balance: 1000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50}
	return Snapshot{Instruments: ins, Accounts: []Account{acc}, Positions: []Position{
		{ID: 1, AccountID: 7, Symbol: "XAUUSD", Side: Buy, Volume: 0.2, OpenPrice: 2000.00},
		{ID: 2, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 0.3, OpenPrice: 1.1002},
	}}
}

// refuseClosedMarkets answers like the trading core: a close on a symbol whose market is not
// QUOTING is refused for market state.
func refuseClosedMarkets(r *rig) func(call) error {
	return func(c call) error {
		if st := r.prices.SymbolState(symbolOf(c.id)); st != tick.Quoting {
			return fmt.Errorf("%s: The market for %s is closed: %w", c.reason, symbolOf(c.id), ErrMarketUnavailable)
		}
		return nil
	}
}

func symbolOf(id int64) string {
	if id == 1 {
		return "XAUUSD"
	}
	return "EURUSD"
}

const skipLine = "stop-out passed over a position it cannot close now"

// TestStopOutPassesOverClosedMarket: the largest loser's market is closed, so the stop-out
// closes the next loser at the very tick that takes the account below its level (−186.00 on
// EURUSD, the level back to 79 %) instead of stalling behind gold; the skip is logged once per
// episode; gold stays watched and is closed at the first tick after its market reopens.
func TestStopOutPassesOverClosedMarket(t *testing.T) {
	t.Parallel()
	r := newRig(t, stopOutDesk(), 1, func(r *rig) {
		r.prices.set("EURUSD", 1.1000, 1.1002)
		r.exec.answer = refuseClosedMarkets(r)
	})
	// Gold −500: equity 494 over margin 395.05 + 330.03 = 68 %.
	r.tick("XAUUSD", 1975.00, 1975.50)
	r.wantCalls()
	r.prices.setState("XAUUSD", tick.MarketClosed)
	// EURUSD −186: equity 314 over 395.05 + 328.23 = 43 %. Without EURUSD: 314 / 395.05 = 79 %.
	r.tick("EURUSD", 1.0940, 1.0942)
	r.wantCalls(call{kind: jobClose, id: 2, reason: fx.CloseStopOut, at: q(1.0940, 1.0942)})
	if n := r.logs.lines(skipLine, "position_id=1", `why="market closed"`); n != 1 {
		t.Fatalf("%d skip lines for gold, want 1:\n%s", n, r.logs)
	}

	// Gold's last price falls while its market is closed (no tick): every evaluation passes it
	// over, and the new episode logs it once.
	r.prices.set("XAUUSD", 1960.00, 1960.50) // 1000 − 186 − 800 = 14 over 392.05: 3.6 %
	r.e.Sweep(context.Background(), SweepUpdatesDropped)
	r.e.Sweep(context.Background(), SweepUpdatesDropped)
	r.settle()
	r.wantCalls(call{kind: jobClose, id: 2, reason: fx.CloseStopOut})
	if n := r.logs.lines(skipLine, "position_id=1"); n != 2 {
		t.Fatalf("%d skip lines for gold over two episodes, want 2:\n%s", n, r.logs)
	}

	// The market reopens: its first tick closes gold.
	r.prices.setState("XAUUSD", tick.Quoting)
	r.tick("XAUUSD", 1960.00, 1960.50)
	r.wantCalls(call{kind: jobClose, id: 2, reason: fx.CloseStopOut},
		call{kind: jobClose, id: 1, reason: fx.CloseStopOut, at: q(1960.00, 1960.50)})
	if s := r.e.Stats(); s.Positions != 0 || s.ExecutorErrors != 0 {
		t.Fatalf("stats after the stop-out: %+v", s)
	}
}

// TestStopOutGoesOnWhenCloseRefused: the engine sees gold quoting, but the executor refuses its
// close for market state (its view of the session changed first). The stop-out goes on to
// EURUSD as soon as the refusal comes back, without waiting for another tick, logs no error,
// and tries gold again only at gold's next tick.
func TestStopOutGoesOnWhenCloseRefused(t *testing.T) {
	t.Parallel()
	refuse := true
	r := newRig(t, stopOutDesk(), 1, func(r *rig) {
		r.prices.set("EURUSD", 1.1000, 1.1002)
		r.prices.set("XAUUSD", 1975.00, 1975.50)
		r.exec.answer = func(c call) error {
			if c.id == 1 && refuse {
				return fmt.Errorf("STOP_OUT: The market for XAUUSD is closed: %w", ErrMarketUnavailable)
			}
			return nil
		}
	})
	r.tick("EURUSD", 1.0940, 1.0942)
	r.settle() // the refusal re-marked the account and handed EURUSD off
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 2, reason: fx.CloseStopOut, at: q(1.0940, 1.0942)})
	if n := r.logs.lines(skipLine, "position_id=1", "close refused for market state"); n != 1 {
		t.Fatalf("%d skip lines for the refused close, want 1:\n%s", n, r.logs)
	}
	if n := r.logs.lines("level=ERROR"); n != 0 {
		t.Fatalf("a refusal for market state logged an error:\n%s", r.logs)
	}

	// Deeper, on gold's own next tick, a new episode (3.6 %): tried again, refused again.
	r.tick("XAUUSD", 1960.00, 1960.50)
	r.settle()
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 2, reason: fx.CloseStopOut},
		call{kind: jobClose, id: 1, reason: fx.CloseStopOut})
	// Not retried until gold ticks again, and logged once in this episode: sweeps pass it over.
	r.e.Sweep(context.Background(), SweepUpdatesDropped)
	r.e.Sweep(context.Background(), SweepUpdatesDropped)
	r.settle()
	if n := len(r.exec.got()); n != 3 {
		t.Fatalf("%d executor calls after sweeps without a gold tick, want 3", n)
	}
	if n := r.logs.lines(skipLine, "position_id=1"); n != 2 {
		t.Fatalf("%d skip lines over two episodes, want 2:\n%s", n, r.logs)
	}
	refuse = false
	r.tick("XAUUSD", 1960.00, 1960.50)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 2, reason: fx.CloseStopOut},
		call{kind: jobClose, id: 1, reason: fx.CloseStopOut}, call{kind: jobClose, id: 1, reason: fx.CloseStopOut})
	if s := r.e.Stats(); s.Positions != 0 || s.MarketRefused != 2 || s.ExecutorErrors != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestStopOutPassesOverHaltedInstrument: a HALTED instrument's position is passed over like a
// closed market's, and closed once the instrument is active again and its symbol ticks.
func TestStopOutPassesOverHaltedInstrument(t *testing.T) {
	t.Parallel()
	snap := stopOutDesk()
	snap.Instruments[len(snap.Instruments)-1].Halted = true
	r := newRig(t, snap, 1, func(r *rig) {
		r.prices.set("XAUUSD", 1975.00, 1975.50)
		r.exec.answer = func(c call) error {
			if c.id == 1 {
				return fmt.Errorf("STOP_OUT: Trading in XAUUSD is halted: %w", ErrMarketUnavailable)
			}
			return nil
		}
	})
	r.tick("EURUSD", 1.0940, 1.0942)
	r.wantCalls(call{kind: jobClose, id: 2, reason: fx.CloseStopOut})
	if n := r.logs.lines(skipLine, "position_id=1", `why="instrument halted"`); n != 1 {
		t.Fatalf("%d skip lines for the halted instrument, want 1:\n%s", n, r.logs)
	}
	active := snap.Instruments[len(snap.Instruments)-1]
	active.Halted = false
	r.exec.mu.Lock()
	r.exec.answer = nil
	r.exec.mu.Unlock()
	r.e.Apply(context.Background(), Change{Kind: InstrumentUpserted, Instrument: active})
	r.tick("XAUUSD", 1960.00, 1960.50)
	r.wantCalls(call{kind: jobClose, id: 2, reason: fx.CloseStopOut}, call{kind: jobClose, id: 1, reason: fx.CloseStopOut})
}

// A stop on a HALTED instrument stays armed and untouched while the halt lasts — no close is
// handed to the executor tick after tick only to be refused — and fires at the first tick once
// the halt is lifted.
func TestStopOnHaltedInstrumentWaitsForTheHalt(t *testing.T) {
	t.Parallel()
	snap := stopOutDesk()
	snap.Positions = snap.Positions[:1]
	snap.Positions[0].SL = 1990.00
	snap.Instruments[len(snap.Instruments)-1].Halted = true
	r := newRig(t, snap, 1, nil)
	for range 3 {
		r.tick("XAUUSD", 1985.00, 1985.50) // through the stop, three times
	}
	r.tick("EURUSD", 1.1002, 1.1004) // a tick of another symbol: the halted book's ticks are done
	r.wantCalls()
	active := snap.Instruments[len(snap.Instruments)-1]
	active.Halted = false
	r.e.Apply(context.Background(), Change{Kind: InstrumentUpserted, Instrument: active})
	r.tick("XAUUSD", 1984.00, 1984.50)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseSL})
}

// TestStopOutRecordsItsDecision: a stop-out hands the executor what it decided on — the level,
// equity and used margin of the round that picked the position, and the terms of the group the
// account is in now: here it was moved from a group that stops out at 50 % into one that stops
// out at 200 % and caps EURUSD at 1:50 with 2 points of markup. 9000 USD, 1 lot EURUSD bought at
// 1.2, marked at 1.13: equity 9000 − 7000 − 20 (markup) = 1980 over 1 × 100,000 × 1.13 ÷ 50 =
// 2260 of margin, 87.6 %: above 50, below 200.
func TestStopOutRecordsItsDecision(t *testing.T) {
	t.Parallel()
	acc := Account{ID: 7, Currency: "USD", Balance: 9000, Leverage: 100, MarginCallLevel: 100, StopOutLevel: 50, Group: "plain"}
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{acc},
		Groups:    []GroupTerms{{Group: "strict", Symbols: map[string]SymbolTerms{"EURUSD": {LeverageMax: 50, Markup: 0.0002}}}},
		Positions: []Position{{ID: 1, AccountID: 7, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.2}}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.13, 1.13) // 2000 over 1130 under the old group: 177 %
	r.wantCalls()
	r.e.Apply(context.Background(), Change{Kind: AccountTermsChanged, Account: Account{ID: 7, Group: "strict", MarginCallLevel: 250, StopOutLevel: 200}})
	r.tick("EURUSD", 1.13, 1.13)
	r.wantCalls(call{kind: jobClose, id: 1, reason: fx.CloseStopOut, at: q(1.13, 1.13)})
	d := r.exec.got()[0].stop
	if d == nil {
		t.Fatal("the stop-out carried no decision")
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	if d.Group != "strict" || d.StopOutLevel != 200 || !near(d.Equity, 1980) || !near(d.UsedMargin, 2260) || !near(d.MarginLevel, 1980.0/2260*100) ||
		d.DecidedAt.IsZero() || len(d.Symbols) != 1 || d.Symbols[0] != (SymbolMark{Symbol: "EURUSD", Leverage: 50, Markup: 0.0002}) {
		t.Fatalf("decision = %+v, want the strict group's terms at 87.6 %%", d)
	}
}
