package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"fxdesk/internal/fx"
)

// The decoders are the desk's first line: whatever bytes arrive, they either refuse with
// EINVALID or return a request whose basic invariants hold. They must never panic.

func FuzzDecodeOrder(f *testing.F) {
	for _, s := range []string{
		`{"accountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`,
		`{"accountId":1,"symbol":"EURUSD","side":"SELL","type":"LIMIT","volume":"1","price":"1.1","sl":"1.2","tp":"1.0","timeInForce":"GTD","expiresAt":"2030-01-02T15:04:05Z","requestNonce":"abc"}`,
		`{"accountId":1,"volume":0.1}`, `{"volume":"1e5"}`, `[]`, `null`, `{"accountId":1}{}`, `{"extra":1}`,
		`{"accountId":-1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"-0.1"}`,
		`{"accountId":1,"symbol":"EURUSD","side":"BUY","type":"STOP_LIMIT","volume":"1","price":"1.2","limitPrice":"1.19"}`,
		`{"accountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10","timeInForce":"IOC","priceBound":"1.10050"}`,
		`{"accountId":1,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.10","timeInForce":"FOK","priceBound":"0"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeOrder(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		if o.AccountID <= 0 || !o.Volume.IsPositive() || (o.Side != fx.Buy && o.Side != fx.Sell) || len(o.Symbol) != 6 {
			t.Fatalf("accepted an order that breaks the invariants: %+v", o)
		}
		if o.Type != fx.Market && o.Type != fx.Limit && o.Type != fx.Stop && o.Type != fx.StopLimit {
			t.Fatalf("accepted type %q", o.Type)
		}
		if (o.Price != nil && !o.Price.IsPositive()) || (o.SL != nil && !o.SL.IsPositive()) || (o.TP != nil && !o.TP.IsPositive()) || (o.PriceBound != nil && !o.PriceBound.IsPositive()) {
			t.Fatalf("accepted a non-positive price: %+v", o)
		}
		if len(o.RequestNonce) > 64 {
			t.Fatalf("accepted a %d-byte nonce", len(o.RequestNonce))
		}
	})
}

func FuzzDecodeAmount(f *testing.F) {
	// The decoder bounds decimals by the most any account currency has (three, KWD); the
	// account's own currency is checked by the trading service (fx.CheckMoney).
	for _, s := range []string{`{"amount":"10.00"}`, `{"amount":"0.001"}`, `{"amount":"0.0001"}`, `{"amount":10}`, `{"amount":"-1"}`, `{"amount":"1","requestNonce":"x y"}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, nonce, err := decodeAmount(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		if !a.IsPositive() || !a.Equal(a.Truncate(fx.MaxMoneyPlaces)) || len(nonce) > 64 || strings.ContainsAny(nonce, " \t\n") {
			t.Fatalf("accepted amount %s nonce %q", a, nonce)
		}
	})
}

func FuzzDecodeCloseAndModify(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"volume":"0.5"}`, `{"volume":"0"}`, `{"sl":"1.1","tp":""}`, `{"sl":null}`, `{"sl":1.1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := decodeClose(bytes.NewReader(b)); err == nil {
			if v != nil && !v.IsPositive() {
				t.Fatalf("close accepted volume %s", v)
			}
		} else if fx.ErrorCode(err) != fx.EINVALID {
			t.Fatalf("close refusal with code %s", fx.ErrorCode(err))
		}
		sl, tp, err := decodeModify(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("modify refusal with code %s", fx.ErrorCode(err))
			}
			return
		}
		for _, c := range []struct {
			set bool
			pos bool
		}{{sl.Set, sl.Value == nil || sl.Value.IsPositive()}, {tp.Set, tp.Value == nil || tp.Value.IsPositive()}} {
			if !c.pos {
				t.Fatalf("modify accepted a non-positive stop: %+v %+v", sl, tp)
			}
		}
	})
}

// Each case names one way a body is wrong; all must be refused as EINVALID with a message.
func TestDecodeOrderRefuses(t *testing.T) {
	t.Parallel()
	base := `"accountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET"`
	for _, tc := range []struct{ name, body string }{
		{"empty body", ``},
		{"not an object", `[1]`},
		{"trailing data", `{` + base + `,"volume":"1"} x`},
		{"unknown field", `{` + base + `,"volume":"1","foo":1}`},
		{"volume as number", `{` + base + `,"volume":1}`},
		{"volume with exponent", `{` + base + `,"volume":"1e2"}`},
		{"volume with plus", `{` + base + `,"volume":"+1"}`},
		{"volume with spaces", `{` + base + `,"volume":" 1"}`},
		{"volume with five decimals", `{` + base + `,"volume":"0.00001"}`},
		{"negative volume", `{` + base + `,"volume":"-1"}`},
		{"zero volume", `{` + base + `,"volume":"0"}`},
		{"missing volume", `{` + base + `}`},
		{"lowercase symbol", `{"accountId":1,"symbol":"eurusd","side":"BUY","type":"MARKET","volume":"1"}`},
		{"missing account", `{"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1"}`},
		{"fractional account", `{"accountId":1.5,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1"}`},
		{"bad type", `{"accountId":1,"symbol":"EURUSD","side":"BUY","type":"ICEBERG","volume":"1"}`},
		{"bad time in force", `{` + base + `,"volume":"1","timeInForce":"GFD"}`},
		{"price bound as number", `{` + base + `,"volume":"1","priceBound":1.1}`},
		{"negative price bound", `{` + base + `,"volume":"1","priceBound":"-1.1"}`},
		{"zero price bound", `{` + base + `,"volume":"1","priceBound":"0"}`},
		{"price bound with eleven decimals", `{` + base + `,"volume":"1","priceBound":"1.12345678901"}`},
		{"bad expiry", `{` + base + `,"volume":"1","expiresAt":"tomorrow"}`},
		{"negative sl", `{` + base + `,"volume":"1","sl":"-1.1"}`},
		{"nonce with space", `{` + base + `,"volume":"1","requestNonce":"a b"}`},
		// encoding/json alone would take the last of two keys and match keys in any case.
		{"duplicate key", `{"accountId":2,"accountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1"}`},
		{"duplicate volume", `{` + base + `,"volume":"1","volume":"100"}`},
		{"key in another case", `{"AccountId":1,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"1"}`},
		{"upper-case key", `{` + base + `,"VOLUME":"1"}`},
		{"two objects", `{` + base + `,"volume":"1"}{}`},
		{"huge body", `{` + base + `,"volume":"1","requestNonce":"` + strings.Repeat("a", defaultBodyBytes) + `"}`},
	} {
		_, err := decodeOrder(strings.NewReader(tc.body))
		if fx.ErrorCode(err) != fx.EINVALID || fx.ErrorMessage(err) == "" {
			t.Errorf("%s: err = %v, want EINVALID", tc.name, err)
		}
	}
	if _, err := decodeOrder(strings.NewReader(`{` + base + `,"volume":"0.10","sl":"1.09000","requestNonce":"n-1"}`)); err != nil {
		t.Fatalf("a good order was refused: %v", err)
	}
	if o, err := decodeOrder(strings.NewReader(`{` + base + `,"volume":"0.10","timeInForce":"IOC","priceBound":"1.10050"}`)); err != nil || o.PriceBound == nil || o.TimeInForce != fx.IOC {
		t.Fatalf("a bounded IOC order: %+v %v", o, err)
	}
}

// The strict decoder's refusals name the problem, so a client can fix its request.
func TestDecodeStrictNamesTheProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"accountId":2,"accountId":1}`, `Duplicate key "accountId"`},
		{`{"AccountID":1}`, `Key "AccountID" must be written "accountId"`},
		{`{"accountId":1} {"accountId":2}`, `nothing after it`},
		{`{"instruments":[{"symbol":"EURUSD","symbol":"GBPUSD"}]}`, `Duplicate key "instruments.symbol"`},
	} {
		var v struct {
			AccountID   *int64 `json:"accountId"`
			Instruments []struct {
				Symbol string `json:"symbol"`
			} `json:"instruments"`
		}
		err := decodeStrict(strings.NewReader(tc.body), &v, false)
		if fx.ErrorCode(err) != fx.EINVALID || !strings.Contains(fx.ErrorMessage(err), tc.want) {
			t.Errorf("%s: err = %v, want EINVALID naming %q", tc.body, err, tc.want)
		}
	}
}

// FuzzDecodeStrict: whatever the bytes, the strict decoder refuses with EINVALID or decodes a
// body that has no duplicate key and no key in another case than its field's.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{"accountId":1}`, `{"accountId":1,"accountId":2}`, `{"ACCOUNTID":1}`, `{"n":{"a":1,"a":2}}`,
		`{"accountId":1}x`, `[{"a":1}]`, `{"instruments":[{"symbol":"A"},{"symbol":"B","symbol":"C"}]}`, `{"m":{"k":1,"K":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v struct {
			AccountID   *int64         `json:"accountId"`
			M           map[string]int `json:"m"`
			Instruments []struct {
				Symbol string `json:"symbol"`
			} `json:"instruments"`
		}
		err := decodeStrict(bytes.NewReader(b), &v, true)
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		if dup := duplicateKey(b); dup != "" {
			t.Fatalf("accepted %q with the key %q twice", b, dup)
		}
	})
}

// duplicateKey finds a key written twice in one object of valid JSON b, by a second, simpler
// walk than checkKeys': one that keeps every object's keys on a stack.
func duplicateKey(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true
				}
				stack = append(stack, &frame{obj: tok == '{', keys: map[string]bool{}, key: tok == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[tok] {
					return tok
				}
				top.keys[tok] = true
				top.key = false
				continue
			}
			if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
	}
}

// FuzzDecodeOCO: a pair is accepted only with an account, exactly two legs each an order the
// order decoder would take, and a nonce within bounds; every refusal is EINVALID.
func FuzzDecodeOCO(f *testing.F) {
	for _, s := range []string{
		`{"accountId":1,"requestNonce":"n","legs":[{"symbol":"EURUSD","side":"BUY","type":"STOP","volume":"1","price":"1.2"},{"symbol":"EURUSD","side":"SELL","type":"STOP_LIMIT","volume":"1","price":"1.0","limitPrice":"1.01"}]}`,
		`{"accountId":1,"legs":[]}`, `{"accountId":1,"legs":[{"accountId":1}]}`, `{"legs":null}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := decodeOCO(bytes.NewReader(b))
		if err != nil {
			if fx.ErrorCode(err) != fx.EINVALID {
				t.Fatalf("refusal with code %s: %v", fx.ErrorCode(err), err)
			}
			return
		}
		if o.AccountID <= 0 || len(o.RequestNonce) > 64 {
			t.Fatalf("accepted a pair that breaks the invariants: %+v", o)
		}
		for _, l := range o.Legs {
			if l.AccountID != o.AccountID || !l.Volume.IsPositive() || len(l.Symbol) != 6 || l.RequestNonce != "" {
				t.Fatalf("accepted a leg that breaks the invariants: %+v", l)
			}
		}
	})
}
