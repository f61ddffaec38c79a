package venuesim

import (
	"net/http"
	"testing"
)

// boundBody is a MARKET order with its timeInForce and priceBound ("" : none).
func boundBody(clientID, units, tif, bound string) any {
	ext := map[string]string{"id": clientID, "tag": "fxdesk"}
	o := map[string]any{"type": "MARKET", "instrument": "EUR_USD", "units": units, "timeInForce": tif, "positionFill": "DEFAULT",
		"clientExtensions": ext, "tradeClientExtensions": ext}
	if bound != "" {
		o["priceBound"] = bound
	}
	return map[string]any{"order": o}
}

// A priceBound is honoured as OANDA does: a buy fills only at an ask at or below it, a sell at a
// bid at or above it; beyond it the order is cancelled BOUNDS_VIOLATION and nothing opens.
// EURUSD is 1.1 / 1.1002.
func TestPriceBoundCancelsAFillBeyondIt(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	for _, c := range []struct {
		id, units, bound string
		fills            bool
	}{
		{"B1", "1000", "1.1002", true},
		{"B2", "1000", "1.1001", false},
		{"S1", "-1000", "1.1", true},
		{"S2", "-1000", "1.1001", false},
	} {
		code, out := e.call(http.MethodPost, "/orders", boundBody(c.id, c.units, "FOK", c.bound))
		if code != http.StatusCreated {
			t.Fatalf("%s: %d %v", c.id, code, out)
		}
		if got := out.has("orderFillTransaction"); got != c.fills {
			t.Fatalf("%s bounded at %s: filled %v, want %v: %v", c.id, c.bound, got, c.fills, out)
		}
		if !c.fills && out.str("orderCancelTransaction", "reason") != "BOUNDS_VIOLATION" {
			t.Fatalf("%s: cancel %v, want BOUNDS_VIOLATION", c.id, out)
		}
		if out.str("orderCreateTransaction", "priceBound") != c.bound {
			t.Fatalf("%s: the order's transaction %v does not carry its priceBound", c.id, out["orderCreateTransaction"])
		}
	}
	if code, out := e.call(http.MethodPost, "/orders", boundBody("X", "1000", "FOK", "-1")); code != http.StatusBadRequest {
		t.Fatalf("a negative priceBound: %d %v, want 400", code, out)
	}
}

// Under a partial fault an IOC order fills its share in whole thousands and a FOK order is
// cancelled whole (INSUFFICIENT_LIQUIDITY): fill or kill never fills a part.
func TestPartialFaultFillsIOCAndKillsFOK(t *testing.T) {
	t.Parallel()
	e := start(t, Config{})
	if code, out := e.control(http.MethodPost, "/control/fault", map[string]any{"kind": "partial", "count": 3, "percent": 60}); code != http.StatusOK {
		t.Fatalf("fault: %d %v", code, out)
	}
	_, ioc := e.call(http.MethodPost, "/orders", boundBody("I1", "-15000", "IOC", ""))
	if got := ioc.str("orderFillTransaction", "units"); got != "-9000" {
		t.Fatalf("IOC of -15,000 at 60 %%: filled %q, want -9000: %v", got, ioc)
	}
	_, fok := e.call(http.MethodPost, "/orders", boundBody("F1", "15000", "FOK", ""))
	if fok.has("orderFillTransaction") || fok.str("orderCancelTransaction", "reason") != "INSUFFICIENT_LIQUIDITY" {
		t.Fatalf("FOK under a partial fault: %v, want cancelled INSUFFICIENT_LIQUIDITY", fok)
	}
	_, tiny := e.call(http.MethodPost, "/orders", boundBody("I2", "1000", "IOC", ""))
	if tiny.has("orderFillTransaction") || tiny.str("orderCancelTransaction", "reason") != "INSUFFICIENT_LIQUIDITY" {
		t.Fatalf("IOC whose part rounds to nothing: %v, want cancelled", tiny)
	}
	if code, out := e.call(http.MethodPost, "/orders", boundBody("G", "1000", "GTC", "")); code != http.StatusBadRequest {
		t.Fatalf("timeInForce GTC on a MARKET order: %d %v, want 400", code, out)
	}
}
