package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/catalog"
	"fxdesk/internal/fx"
	"fxdesk/internal/trading"
)

// decodeStrict reads exactly one JSON object into v, refusing what a lenient decoder would
// guess at: unknown fields, wrong types, duplicate keys (encoding/json keeps the last, so
// {"accountId":2,"accountId":1} would trade account 1), keys in another case than the field's
// (encoding/json matches them anyway), and anything after the object. Each refusal names what was
// wrong. An empty body is an error unless emptyOK. The body's size is bounded at the edge
// (limitBody); a body past it answers ETOOLARGE here, where it is read.
func decodeStrict(r io.Reader, v any, emptyOK bool) error {
	b, err := io.ReadAll(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fx.TooLarge(tooLarge.Limit)
		}
		return fmt.Errorf("read request body: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if emptyOK {
			return nil
		}
		return fx.Errorf(fx.EINVALID, "The request body is empty; send a JSON object.")
	}
	if err := checkKeys(b, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			if te.Field != "" {
				return fx.Errorf(fx.EINVALID, "%s must be %s, not %s.", te.Field, expectedType(te.Field, te.Type), jsonKind(te.Value))
			}
			return fx.Errorf(fx.EINVALID, "The request body must be a JSON object.")
		case errors.As(err, &se):
			return fx.Errorf(fx.EINVALID, "The request body is not valid JSON (at byte %d).", se.Offset)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return fx.Errorf(fx.EINVALID, "Unknown field %s.", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return fx.Errorf(fx.EINVALID, "The request body is not valid JSON.")
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fx.Errorf(fx.EINVALID, "The request body must hold exactly one JSON object, with nothing after it.")
	}
	return nil
}

// checkKeys walks the JSON in b beside the Go type it will be decoded into and refuses a
// duplicate key in any object, and a key that names a field in another case. It leaves
// every other fault (syntax, types, unknown fields) to the decoder, whose messages say more.
func checkKeys(b []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var walk func(t reflect.Type, path string) error
	walk = func(t reflect.Type, path string) error {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		tok, err := dec.Token()
		if err != nil {
			return errStopWalk
		}
		switch tok {
		case json.Delim('{'):
			fields := structJSONFields(t)
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return errStopWalk
				}
				key, _ := kt.(string)
				name := path + key
				if seen[key] {
					return fx.Errorf(fx.EINVALID, "Duplicate key %q: each field may appear once.", name)
				}
				seen[key] = true
				var elem reflect.Type
				if t != nil && t.Kind() == reflect.Map {
					elem = t.Elem()
				} else if fields != nil {
					f, exact := fields[key]
					if !exact {
						for tag := range fields {
							if strings.EqualFold(tag, key) {
								return fx.Errorf(fx.EINVALID, "Key %q must be written %q: keys are case-sensitive.", name, path+tag)
							}
						}
					}
					elem = f
				}
				if err := walk(elem, name+"."); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return errStopWalk
			}
		case json.Delim('['):
			var elem reflect.Type
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
				elem = t.Elem()
			}
			for dec.More() {
				if err := walk(elem, path); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return errStopWalk
			}
		}
		return nil
	}
	if err := walk(t, ""); err != nil && err != errStopWalk {
		return err
	}
	return nil
}

// errStopWalk ends checkKeys at malformed JSON: the decoder reports that better.
var errStopWalk = errors.New("malformed JSON")

// structJSONFields maps a struct's JSON field names to their types; nil for anything else.
func structJSONFields(t reflect.Type) map[string]reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// decimalFields are the string fields that carry amounts, prices and volumes.
var decimalFields = map[string]bool{"amount": true, "volume": true, "price": true, "sl": true, "tp": true,
	"volumeMin": true, "volumeStep": true, "volumeMax": true, "marginCallLevel": true, "stopOutLevel": true}

// expectedType says, for a type error's message, what field (as encoding/json names it, dotted
// when nested) should have held.
func expectedType(field string, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		if decimalFields[field[strings.LastIndexByte(field, '.')+1:]] {
			return `a decimal string such as "1.25"`
		}
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number such as 42"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.Map, reflect.Struct:
		return "a JSON object"
	}
	return "another type"
}

// jsonKind names what encoding/json found ("number 1.5" → "a number").
func jsonKind(value string) string {
	switch kind, _, _ := strings.Cut(value, " "); kind {
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "array":
		return "an array"
	case "object":
		return "an object"
	}
	return value
}

func optDecimal(field string, s *string, places int) (*decimal.Decimal, error) {
	if s == nil {
		return nil, nil
	}
	d, err := fx.ParseDecimal(field, *s, places)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// pricePlaces and volumePlaces are the most decimals the schema stores.
const (
	pricePlaces  = 10
	volumePlaces = 4
)

func checkNonce(n string) error {
	if len(n) > 64 {
		return fx.Errorf(fx.EINVALID, "requestNonce must be at most 64 characters.")
	}
	for _, c := range n {
		if c < 0x21 || c > 0x7e {
			return fx.Errorf(fx.EINVALID, "requestNonce must be printable ASCII without spaces.")
		}
	}
	return nil
}

func checkSymbol(s string) error {
	if !fx.ValidSymbol(s) {
		return fx.Errorf(fx.EINVALID, "Unknown symbol %q: symbols are six-letter codes such as EURUSD.", s)
	}
	return nil
}

type orderWire struct {
	AccountID    *int64  `json:"accountId"`
	Symbol       string  `json:"symbol"`
	Side         string  `json:"side"`
	Type         string  `json:"type"`
	Volume       *string `json:"volume"`
	Price        *string `json:"price"`
	LimitPrice   *string `json:"limitPrice"`
	SL           *string `json:"sl"`
	TP           *string `json:"tp"`
	TimeInForce  string  `json:"timeInForce"`
	ExpiresAt    *string `json:"expiresAt"`
	RequestNonce string  `json:"requestNonce"`
	PriceBound   *string `json:"priceBound"`
}

// decodeOrder reads POST /api/fx/orders. Rules that need the instrument (digits, volume step,
// market side) are the trading service's.
func decodeOrder(r io.Reader) (trading.OrderRequest, error) {
	var w orderWire
	if err := decodeStrict(r, &w, false); err != nil {
		return trading.OrderRequest{}, err
	}
	var o trading.OrderRequest
	if w.AccountID == nil || *w.AccountID <= 0 {
		return o, fx.Errorf(fx.EINVALID, "accountId is required.")
	}
	o.AccountID = *w.AccountID
	return orderOfWire(w, o)
}

// orderOfWire reads the fields of an order after its account: POST /orders and each leg of
// POST /orders/oco.
func orderOfWire(w orderWire, o trading.OrderRequest) (trading.OrderRequest, error) {
	if err := checkSymbol(w.Symbol); err != nil {
		return o, err
	}
	o.Symbol = w.Symbol
	switch fx.Side(w.Side) {
	case fx.Buy, fx.Sell:
		o.Side = fx.Side(w.Side)
	default:
		return o, fx.Errorf(fx.EINVALID, "side must be BUY or SELL.")
	}
	switch fx.OrderType(w.Type) {
	case fx.Market, fx.Limit, fx.Stop, fx.StopLimit:
		o.Type = fx.OrderType(w.Type)
	default:
		return o, fx.Errorf(fx.EINVALID, "type must be MARKET, LIMIT, STOP or STOP_LIMIT.")
	}
	if w.Volume == nil {
		return o, fx.Errorf(fx.EINVALID, "volume (lots, a decimal string) is required.")
	}
	v, err := fx.ParseDecimal("volume", *w.Volume, volumePlaces)
	if err != nil {
		return o, err
	}
	if !v.IsPositive() {
		return o, fx.Errorf(fx.EINVALID, "volume must be positive.")
	}
	o.Volume = v
	if o.Price, err = optDecimal("price", w.Price, pricePlaces); err != nil {
		return o, err
	}
	if o.SL, err = optDecimal("sl", w.SL, pricePlaces); err != nil {
		return o, err
	}
	if o.TP, err = optDecimal("tp", w.TP, pricePlaces); err != nil {
		return o, err
	}
	if o.LimitPrice, err = optDecimal("limitPrice", w.LimitPrice, pricePlaces); err != nil {
		return o, err
	}
	for _, p := range []*decimal.Decimal{o.Price, o.SL, o.TP, o.LimitPrice} {
		if p != nil && !p.IsPositive() {
			return o, fx.Errorf(fx.EINVALID, "price, limitPrice, sl and tp must be positive.")
		}
	}
	switch fx.TimeInForce(w.TimeInForce) {
	case "", fx.GTC, fx.GTD, fx.DAY, fx.IOC, fx.FOK:
		o.TimeInForce = fx.TimeInForce(w.TimeInForce)
	default:
		return o, fx.Errorf(fx.EINVALID, "timeInForce must be GTC, GTD or DAY (resting orders) or IOC or FOK (MARKET orders).")
	}
	if o.PriceBound, err = optDecimal("priceBound", w.PriceBound, pricePlaces); err != nil {
		return o, err
	}
	if o.PriceBound != nil && !o.PriceBound.IsPositive() {
		return o, fx.Errorf(fx.EINVALID, "priceBound must be positive.")
	}
	if w.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.ExpiresAt)
		if err != nil {
			return o, fx.Errorf(fx.EINVALID, "expiresAt must be an RFC 3339 time such as 2026-01-02T15:04:05Z.")
		}
		o.ExpiresAt = &t
	}
	if err := checkNonce(w.RequestNonce); err != nil {
		return o, err
	}
	o.RequestNonce = w.RequestNonce
	return o, nil
}

type closeWire struct {
	Volume *string `json:"volume"`
}

// decodeClose reads POST /positions/{id}/close; an empty body closes everything.
func decodeClose(r io.Reader) (*decimal.Decimal, error) {
	var w closeWire
	if err := decodeStrict(r, &w, true); err != nil {
		return nil, err
	}
	v, err := optDecimal("volume", w.Volume, volumePlaces)
	if err != nil {
		return nil, err
	}
	if v != nil && !v.IsPositive() {
		return nil, fx.Errorf(fx.EINVALID, "volume must be positive.")
	}
	return v, nil
}

// decodeNothing reads the body of a route that takes none: empty, or {}.
func decodeNothing(r io.Reader) error {
	var w struct{}
	return decodeStrict(r, &w, true)
}

type modifyWire struct {
	SL           *string         `json:"sl"`
	TP           *string         `json:"tp"`
	TrailingStop json.RawMessage `json:"trailingStop"` // decode_trail.go
}

// decodeModify reads PATCH /positions/{id}: a field left out (or null) stays, "" removes it.
func decodeModify(r io.Reader) (sl, tp trading.StopChange, err error) {
	sl, tp, _, err = decodeModifyTrail(r)
	return sl, tp, err
}

// decodeModifyTrail is decodeModify with the trailing stop (decode_trail.go).
func decodeModifyTrail(r io.Reader) (sl, tp trading.StopChange, trail trading.TrailChange, err error) {
	var w modifyWire
	if err := decodeStrict(r, &w, false); err != nil {
		return sl, tp, trail, err
	}
	if trail, err = decodeTrail(w.TrailingStop); err != nil {
		return sl, tp, trail, err
	}
	conv := func(field string, s *string) (trading.StopChange, error) {
		if s == nil {
			return trading.StopChange{}, nil
		}
		if *s == "" {
			return trading.StopChange{Set: true}, nil
		}
		d, err := fx.ParseDecimal(field, *s, pricePlaces)
		if err != nil {
			return trading.StopChange{}, err
		}
		if !d.IsPositive() {
			return trading.StopChange{}, fx.Errorf(fx.EINVALID, "%s must be positive.", field)
		}
		return trading.StopChange{Set: true, Value: &d}, nil
	}
	if sl, err = conv("sl", w.SL); err != nil {
		return
	}
	tp, err = conv("tp", w.TP)
	return
}

type amountWire struct {
	Amount       *string `json:"amount"`
	RequestNonce string  `json:"requestNonce"`
}

// decodeAmount reads a deposit or withdrawal: a positive amount with at most fx.MaxMoneyPlaces
// decimals. How many the account's currency allows (none for JPY, two for USD, three for KWD)
// is the trading service's check, once it has read the account.
func decodeAmount(r io.Reader) (decimal.Decimal, string, error) {
	var w amountWire
	if err := decodeStrict(r, &w, false); err != nil {
		return decimal.Decimal{}, "", err
	}
	a, err := w.check()
	return a, w.RequestNonce, err
}

// check checks the amount and the nonce of a deposit or withdrawal and returns the amount.
func (w amountWire) check() (decimal.Decimal, error) {
	if w.Amount == nil {
		return decimal.Decimal{}, fx.Errorf(fx.EINVALID, "amount (a decimal string) is required.")
	}
	a, err := fx.ParseDecimal("amount", *w.Amount, fx.MaxMoneyPlaces)
	if err != nil {
		return decimal.Decimal{}, err
	}
	if !a.IsPositive() {
		return decimal.Decimal{}, fx.Errorf(fx.EINVALID, "amount must be positive.")
	}
	if err := checkNonce(w.RequestNonce); err != nil {
		return decimal.Decimal{}, err
	}
	return a, nil
}

type staffAmountWire struct {
	Amount       *string `json:"amount"`
	RequestNonce string  `json:"requestNonce"`
	Comment      string  `json:"comment"`
}

// decodeStaffAmount reads a deposit or withdrawal by desk staff: decodeAmount's fields and the
// staff's comment, which a money request above the four-eyes threshold carries.
func decodeStaffAmount(r io.Reader) (amount decimal.Decimal, nonce, comment string, err error) {
	var w staffAmountWire
	if err := decodeStrict(r, &w, false); err != nil {
		return decimal.Decimal{}, "", "", err
	}
	amount, err = amountWire{Amount: w.Amount, RequestNonce: w.RequestNonce}.check()
	return amount, w.RequestNonce, w.Comment, err
}

type accountWire struct {
	Currency string `json:"currency"`
	Leverage *int   `json:"leverage"`
}

// decodeAccount reads POST /accounts.
func decodeAccount(r io.Reader) (string, int, error) {
	var w accountWire
	if err := decodeStrict(r, &w, false); err != nil {
		return "", 0, err
	}
	if len(w.Currency) != 3 || strings.ToUpper(w.Currency) != w.Currency {
		return "", 0, fx.Errorf(fx.EINVALID, "currency must be a three-letter code such as USD.")
	}
	if w.Leverage == nil {
		return "", 0, fx.Errorf(fx.EINVALID, "leverage (a whole number such as 100) is required.")
	}
	return w.Currency, *w.Leverage, nil
}

type instrumentWire struct {
	Symbol      string               `json:"symbol"`
	Status      *fx.InstrumentStatus `json:"status"`
	LeverageMax *int                 `json:"leverageMax"`
	VolumeMin   *string              `json:"volumeMin"`
	VolumeStep  *string              `json:"volumeStep"`
	VolumeMax   *string              `json:"volumeMax"`
	SymbolGroup *string              `json:"symbolGroup"`
}

// decodeInstruments reads PUT /api/admin/fx/instruments: {"instruments":[{symbol, …changes}]}.
func decodeInstruments(r io.Reader) ([]catalog.InstrumentPatch, error) {
	var w struct {
		Instruments []instrumentWire `json:"instruments"`
	}
	if err := decodeStrict(r, &w, false); err != nil {
		return nil, err
	}
	if len(w.Instruments) == 0 || len(w.Instruments) > 1000 {
		return nil, fx.Errorf(fx.EINVALID, "instruments must list from 1 to 1000 changes.")
	}
	out := make([]catalog.InstrumentPatch, 0, len(w.Instruments))
	for i, in := range w.Instruments {
		if err := checkSymbol(in.Symbol); err != nil {
			return nil, fx.Errorf(fx.EINVALID, "instruments[%d]: %s", i, fx.ErrorMessage(err))
		}
		p := catalog.InstrumentPatch{Symbol: in.Symbol, Status: in.Status, LeverageMax: in.LeverageMax, SymbolGroup: in.SymbolGroup}
		var err error
		field := func(name string) string { return fmt.Sprintf("instruments[%d].%s", i, name) }
		if p.VolumeMin, err = optDecimal(field("volumeMin"), in.VolumeMin, volumePlaces); err != nil {
			return nil, err
		}
		if p.VolumeStep, err = optDecimal(field("volumeStep"), in.VolumeStep, volumePlaces); err != nil {
			return nil, err
		}
		if p.VolumeMax, err = optDecimal(field("volumeMax"), in.VolumeMax, volumePlaces); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// decodeSettings reads PUT /api/admin/fx/settings: {"name":"value", …}, values as strings.
func decodeSettings(r io.Reader) (map[string]string, error) {
	var w map[string]string
	if err := decodeStrict(r, &w, false); err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fx.Errorf(fx.EINVALID, "The request body must be a JSON object of setting names to string values.")
	}
	return w, nil
}
