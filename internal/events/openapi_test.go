package events

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// payloads is the payload each type carries, as its writers build it.
var payloads = map[Type]any{
	OrderAccepted: Order{}, OrderRejected: Rejected{}, OrderFilled: Order{}, OrderTriggered: Order{}, OrderCancelled: Order{}, OrderExpired: Order{},
	OrderModified: Order{}, OrderStopTriggered: Order{},
	PositionOpened: Position{}, PositionModified: Position{}, PositionClosed: Closed{}, PositionPartlyClosed: Closed{},
	AccountMarginCall: MarginCall{}, AccountMarginCallCleared: MarginCall{}, AccountStopOut: StopOut{}, SwapCharged: Swap{},
	Deposit: Balance{}, Withdrawal: Balance{}, Adjustment: Balance{},
}

// The OpenAPI description of the events page lists every type, and names for each the schema of
// its payload, whose fields are exactly those the payload sends: a type or a field added here
// cannot leave the documentation behind.
func TestOpenAPIDocumentsEveryTypeAndPayload(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Description string `json:"description"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
				Payloads map[string]string `json:"x-payloads"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	if len(payloads) != len(Types) {
		t.Fatalf("%d types, %d payloads in this test: one is missing", len(Types), len(payloads))
	}
	event := doc.Components.Schemas["Event"]
	var want []string
	for _, ty := range Types {
		want = append(want, string(ty))
	}
	if got := event.Properties["type"].Enum; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("schema Event's type lists %v; the types are %v", got, want)
	}
	if got := slices.Sorted(maps.Keys(event.Payloads)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("schema Event's x-payloads names %v; the types are %v", got, want)
	}
	page := doc.Paths["/api/fx/events"]["get"].Description
	for _, ty := range Types {
		if !strings.Contains(page, string(ty)) {
			t.Errorf("GET /api/fx/events does not mention %s", ty)
		}
		name := event.Payloads[string(ty)]
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("%s: no schema %q", ty, name)
			continue
		}
		documented := slices.Sorted(maps.Keys(schema.Properties))
		if sent := jsonFields(reflect.TypeOf(payloads[ty])); !slices.Equal(documented, sent) {
			t.Errorf("%s: schema %s documents %v; the payload sends %v", ty, name, documented, sent)
		}
	}
}

// jsonFields is the sorted list of JSON names a struct type marshals to, embedded structs'
// fields included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
