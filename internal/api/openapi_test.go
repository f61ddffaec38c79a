package api

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/auth"
	"fxdesk/internal/catalog"
	"fxdesk/internal/desk"
	"fxdesk/internal/eod"
	"fxdesk/internal/hedge"
	"fxdesk/internal/metrics"
	"fxdesk/internal/pricesource"
	"fxdesk/internal/relay"
	"fxdesk/internal/routing"
	"fxdesk/internal/store"
)

// The OpenAPI file in docs/ and the router must list the same routes, so the documentation
// cannot drift from the code.
func TestOpenAPIMatchesTheRouter(t *testing.T) {
	raw, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}

	// The router is built as the binaries build it; no request is served, so the pool never dials.
	db, err := store.Connect("root@tcp(127.0.0.1:1)/unused")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	parts := newTestParts(t, db, false)
	log, svc, admin := parts.log, parts.svc, parts.admin
	h, err := NewServer(Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: admin, Settings: catalog.NewSettings(db, log), Alerts: alert.NewInbox(db, log), Auth: auth.NewResolver(db)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(Deps{Log: log, DB: db}); err == nil || !strings.Contains(err.Error(), "Trading") {
		t.Fatalf("NewServer without its dependencies: %v", err)
	}
	routed := map[string]bool{}
	err = chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed[method+" "+strings.TrimSuffix(route, "/")] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	var missing, undocumented []string
	for r := range routed {
		if !documented[r] {
			undocumented = append(undocumented, r)
		}
	}
	for r := range documented {
		if !routed[r] {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(undocumented)
	if len(undocumented) > 0 {
		t.Errorf("routes missing from docs/openapi.json:\n  %s", strings.Join(undocumented, "\n  "))
	}
	if len(missing) > 0 {
		t.Errorf("documented routes the router does not serve:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(routed) < 25 {
		t.Errorf("only %d routes walked; the walk is not seeing the router", len(routed))
	}

	// Each operation says what its guard needs (x-fxdesk-needs: "permission money", "scope
	// trade"), as the router's guards record it.
	_, guards := guardedRoutes(Deps{Log: log, DB: db, Desk: desk.NewCron(db, nil, desk.Config{}, log), Quotes: &desk.Quotes{}, Metrics: metrics.New("test"),
		Trading: svc, Catalog: admin, Settings: catalog.NewSettings(db, log), Alerts: alert.NewInbox(db, log), Auth: auth.NewResolver(db)})
	for path, ops := range doc.Paths {
		for method, op := range ops {
			var needs struct {
				Needs string `json:"x-fxdesk-needs"`
			}
			json.Unmarshal(op, &needs)
			key := strings.ToUpper(method) + " " + path
			if needs.Needs != guards[key] {
				t.Errorf("docs/openapi.json says %s needs %q; its guard needs %q", key, needs.Needs, guards[key])
			}
		}
	}
}

// The documented response schemas name exactly the JSON fields the views send, so a renamed field
// (openVolume → initialVolume, self → thisProcess, lastRenewMs → lastRenewTookMs) cannot leave
// the documentation behind.
func TestOpenAPISchemasMatchTheViews(t *testing.T) {
	raw, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/openapi.json: %v", err)
	}
	for name, view := range map[string]any{"Position": positionView{}, "Account": accountView{}, "DeskStatus": desk.Status{}, "AuditEntry": audit.Entry{},
		"Webhook": relay.Webhook{}, "DeadLetter": relay.DeadLetter{}, "Token": tokenView{},
		"Order": orderView{}, "AccountProfile": profileView{}, "RoutingRule": routing.Rule{}, "DealerPnL": pnlView{}, "PnLFigures": pnlFigures{},
		"HedgePosition": hedge.Position{}, "HedgeOrder": hedge.Order{}, "MoneyRequest": moneyRequestView{},
		"EODReport": eodReportView{}, "EODDay": eod.Day{}, "EODDeskSymbol": eodDeskSymbol{}, "EODDeskFigures": eodDeskFigures{},
		"EODAccountTotals": eodAccountTotals{}, "EODMismatch": eod.Mismatch{}, "EODAccount": eodAccountView{},
		"Statement": statementView{}, "StatementSnapshot": statementSnapshot{}, "StatementTotals": statementTotals{}, "StatementDeal": statementDeal{},
		"StatementClosedPosition": closedPositionView{},
		"PriceSources":            pricesView{}, "PriceSource": sourceView{}, "PriceSelection": selectionView{}, "PriceSourcePin": pricesource.Pin{}, "RejectedTick": rejectedView{}} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("docs/openapi.json has no schema %s", name)
			continue
		}
		documented := slices.Sorted(maps.Keys(schema.Properties))
		if sent := jsonFields(reflect.TypeOf(view)); !slices.Equal(documented, sent) {
			t.Errorf("schema %s documents %v; the view sends %v", name, documented, sent)
		}
	}
}

// jsonFields is the sorted list of JSON names a struct type marshals to.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...) // embedded: its fields are the view's
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
