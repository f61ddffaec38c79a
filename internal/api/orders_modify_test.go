package api

import (
	"bytes"
	"strings"
	"testing"

	"fxdesk/internal/fx"
)

// A modify's body is refused with EINVALID and nothing else, and what it accepts keeps its
// promises: positive prices and volume, a resting timeInForce, a bounded nonce.
func FuzzDecodeOrderModify(f *testing.F) {
	for _, s := range []string{`{"price":"1.1"}`, `{"limitPrice":"1.09","volume":"0.2"}`, `{"sl":"","tp":"1.2"}`, `{"timeInForce":"GTD","expiresAt":"2030-01-02T15:04:05Z"}`,
		`{"timeInForce":"IOC"}`, `{"price":"-1"}`, `{"volume":"0"}`, `{"price":1.1}`, `{"price":"1.1","price":"1.2"}`, `{"Price":"1.1"}`, `{"requestNonce":"a b"}`, ``, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeOrderModify(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		for _, p := range []struct {
			name string
			ok   bool
		}{{"price", c.Price == nil || c.Price.IsPositive()}, {"limitPrice", c.LimitPrice == nil || c.LimitPrice.IsPositive()},
			{"volume", c.Volume == nil || c.Volume.IsPositive()}, {"sl", c.SL.Value == nil || c.SL.Value.IsPositive()}, {"tp", c.TP.Value == nil || c.TP.Value.IsPositive()}} {
			if !p.ok {
				t.Fatalf("accepted a non-positive %s: %+v", p.name, c)
			}
		}
		switch c.TimeInForce {
		case "", fx.GTC, fx.GTD, fx.DAY:
		default:
			t.Fatalf("accepted timeInForce %q on a resting order", c.TimeInForce)
		}
	})
}

// Each refusal of the decoder names what was wrong.
func TestDecodeOrderModifyRefusals(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		``:                             "empty",
		`{"price":"0"}`:                "price must be positive",
		`{"volume":"-0.1"}`:            "volume must be positive",
		`{"timeInForce":"FOK"}`:        "GTC, GTD or DAY",
		`{"expiresAt":"tomorrow"}`:     "RFC 3339",
		`{"side":"SELL"}`:              "Unknown field",
		`{"requestNonce":"has space"}`: "printable ASCII",
		`{"sl":"1.1","sl":"1.2"}`:      "Duplicate key",
	} {
		_, err := decodeOrderModify(strings.NewReader(body))
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), want) {
			t.Errorf("%s: %v, want EINVALID naming %q", body, err, want)
		}
	}
	c, err := decodeOrderModify(strings.NewReader(`{"sl":"","tp":null,"price":"1.10"}`))
	if err != nil || !c.SL.Set || c.SL.Value != nil || c.TP.Set || c.Price.String() != "1.1" {
		t.Fatalf("sl removed, tp kept, price set: %+v %v", c, err)
	}
}

// The dealer's modify needs the holder's prices, which the audit walk's desk has not: its audit
// row is checked end to end.
func init() {
	auditedInE2E["PATCH /api/admin/fx/orders/{id}"] = "TestDealerModifiesAnOrder"
}
