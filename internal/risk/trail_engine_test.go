package risk

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"fxdesk/internal/fx"
	"fxdesk/internal/tick"
)

// TestTrailingStopFollowsTheMarketAndFiresAtTheGappedQuote: a BUY trail on the bid and a SELL
// trail on the ask move only in the trader's favour, fire with reason TRAILING_STOP at the quote
// that reached them (a gap: the gapped quote, not the level), and MovedTrails reports the moved
// levels once.
func TestTrailingStopFollowsTheMarketAndFiresAtTheGappedQuote(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1, TrailDistance: 0.002, TrailLevel: 1.098},
		{ID: 2, AccountID: 1, Symbol: "EURUSD", Side: Sell, Volume: 1, OpenPrice: 1.1, TrailDistance: 0.002, TrailLevel: 1.1080},
	}}
	r := newRig(t, snap, 1, nil)
	r.tick("EURUSD", 1.1050, 1.1052) // up: the BUY trail moves to 1.1030, the SELL trail to 1.1072
	r.tick("EURUSD", 1.1040, 1.1042) // back: the BUY trail stays, the SELL trail moves to 1.1062
	r.wantCalls()
	moved := r.e.MovedTrails(nil)
	slices.SortFunc(moved, func(a, b TrailLevel) int { return int(a.PositionID - b.PositionID) })
	if len(moved) != 2 || !near(moved[0].Level, 1.1030) || !near(moved[1].Level, 1.1062) {
		t.Fatalf("moved %+v, want position 1 at 1.1030 and 2 at 1.1062", moved)
	}
	if again := r.e.MovedTrails(nil); len(again) != 0 {
		t.Fatalf("moved again %+v, want nothing", again)
	}
	if tr, ok := r.e.TrailOf(2); !ok || !near(tr.Level, 1.1062) {
		t.Fatalf("SELL trail %+v %v, want 1.1062", tr, ok)
	}
	r.tick("EURUSD", 1.0900, 1.0902) // a gap through the BUY trail
	r.wantCalls(call{kind: jobClose, id: 1, account: 1, reason: fx.CloseTrailingStop, at: q(1.0900, 1.0902)})
	if tr, ok := r.e.TrailOf(2); !ok || !near(tr.Level, 1.0922) {
		t.Fatalf("SELL trail %+v %v, want 1.0922 after the fall", tr, ok)
	}
	r.tick("EURUSD", 1.0920, 1.0922) // the SELL trail, exactly
	r.wantCalls(call{kind: jobClose, id: 1, account: 1, reason: fx.CloseTrailingStop, at: q(1.0900, 1.0902)},
		call{kind: jobClose, id: 2, account: 1, reason: fx.CloseTrailingStop, at: q(1.0920, 1.0922)})
}

// TestTrailSetMovesRemovesAndSurvivesAFailedClose: TrailSet replaces or removes a trail; a close
// the executor fails puts the trail back at the level it fired at.
func TestTrailSetMovesRemovesAndSurvivesAFailedClose(t *testing.T) {
	t.Parallel()
	snap := Snapshot{Instruments: instruments(), Accounts: []Account{rich(1)}, Positions: []Position{
		{ID: 1, AccountID: 1, Symbol: "EURUSD", Side: Buy, Volume: 1, OpenPrice: 1.1},
	}}
	var fail atomic.Bool
	r := newRig(t, snap, 1, func(r *rig) {
		r.exec.answer = func(call) error {
			if fail.CompareAndSwap(true, false) {
				return errors.New("deadlock")
			}
			return nil
		}
	})
	ctx := context.Background()
	r.e.Apply(ctx, Change{Kind: TrailSet, Position: Position{ID: 1, TrailDistance: 0.001, TrailLevel: 1.099}})
	r.tick("EURUSD", 1.1010, 1.1012)
	if tr, ok := r.e.TrailOf(1); !ok || !near(tr.Level, 1.1000) {
		t.Fatalf("trail %+v %v, want 1.1000", tr, ok)
	}
	r.e.Apply(ctx, Change{Kind: TrailSet, Position: Position{ID: 1}})
	r.tick("EURUSD", 1.0900, 1.0902) // far through the removed trail
	r.wantCalls()
	r.e.Apply(ctx, Change{Kind: TrailSet, Position: Position{ID: 1, TrailDistance: 0.001, TrailLevel: 1.0890}})
	fail.Store(true)
	r.tick("EURUSD", 1.0880, 1.0882)
	r.wantCalls(call{kind: jobClose, id: 1, account: 1, reason: fx.CloseTrailingStop, at: q(1.0880, 1.0882)})
	if tr, ok := r.e.TrailOf(1); !ok || !near(tr.Level, 1.0890) {
		t.Fatalf("after a failed close the trail is %+v %v, want back at 1.0890", tr, ok)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// TestTicksPublishedDuringTheLoadAreEvaluatedBeforeTheBootSweep: a new holder's risk engine
// loads its view while the tick engine publishes; the boot sweep judges the current price. The
// ticks that waited in the subscription meanwhile are older than that price, so they are
// evaluated before the sweep, in their order: after it, a SELL trail the sweep had moved down to
// a gap's price (level 1.14754) fired on the quote from before the gap (ask 1.24215), which never
// reached its stored level (1.24245), and the batch closed it at the gapped market, 16 pips past
// the level (soak seed 653824426413480, trailClosesAtTheirLevel).
func TestTicksPublishedDuringTheLoadAreEvaluatedBeforeTheBootSweep(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	exec := &fakeExec{}
	prices := &fakePrices{}
	updates := make(chan tick.Update, 1)
	e := runHeldLoad(t, release, []Position{
		{ID: 1, AccountID: 1, Symbol: "GBPUSD", Side: Sell, Volume: 1, OpenPrice: 1.32034, TrailDistance: 0.0016, TrailLevel: 1.24245},
	}, prices, updates, exec, 1)
	updates <- prices.set("GBPUSD", 1.24199, 1.24215) // published while the view loads
	gapped := prices.set("GBPUSD", 1.14579, 1.14594)  // then the gap: the price the sweep reads
	close(release)
	recv(t, e.Ready())
	// The channel holds one update: each send returns once Run took the one before, so after the
	// second every update before it has been evaluated.
	updates <- gapped
	updates <- gapped
	e.work.waitIdle()
	if got := exec.got(); len(got) != 0 {
		t.Fatalf("executor calls %+v; want none: the market never rose to the trail", got)
	}
	if tr, ok := e.TrailOf(1); !ok || !near(tr.Level, 1.14754) {
		t.Fatalf("SELL trail %+v %v, want it at 1.14754 after the gap", tr, ok)
	}
}
