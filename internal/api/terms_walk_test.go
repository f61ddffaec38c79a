package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"fxdesk/internal/catalog"
	"fxdesk/internal/risk"
	"fxdesk/internal/trading"
)

// markingView is what the risk engine marks accounts with: every instrument's terms, every
// account group's own symbol terms, and each account's group and its levels.
type markingView struct {
	Instruments map[string]risk.Instrument
	Groups      map[string]map[string]risk.SymbolTerms
	Accounts    map[int64]risk.Account // ID, Group, GroupLeverage, MarginCallLevel, StopOutLevel
}

func accountTermsOf(a risk.Account) risk.Account {
	return risk.Account{ID: a.ID, Group: a.Group, GroupLeverage: a.GroupLeverage, MarginCallLevel: a.MarginCallLevel, StopOutLevel: a.StopOutLevel}
}

// markingViewOf is the view a holder booting now would load (trading.RiskDesk.Load, the engine's own
// loader).
func markingViewOf(t *testing.T, svc *trading.Service) markingView {
	t.Helper()
	s, err := trading.NewRiskDesk(svc, nil).Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := markingView{Instruments: map[string]risk.Instrument{}, Groups: map[string]map[string]risk.SymbolTerms{}, Accounts: map[int64]risk.Account{}}
	for _, in := range s.Instruments {
		v.Instruments[in.Symbol] = in
	}
	for _, g := range s.Groups {
		if len(g.Symbols) > 0 {
			v.Groups[g.Group] = g.Symbols
		}
	}
	for _, a := range s.Accounts {
		v.Accounts[a.ID] = accountTermsOf(a)
	}
	return v
}

// apply is what the engine does with the changes that alter marking (risk's applyLocked).
func (v *markingView) apply(cs ...risk.Change) {
	for _, c := range cs {
		switch c.Kind {
		case risk.InstrumentUpserted:
			v.Instruments[c.Instrument.Symbol] = c.Instrument
		case risk.GroupTermsSet:
			if len(c.GroupTerms.Symbols) == 0 {
				delete(v.Groups, c.GroupTerms.Group)
			} else {
				v.Groups[c.GroupTerms.Group] = c.GroupTerms.Symbols
			}
		case risk.AccountTermsChanged, risk.AccountUpserted:
			v.Accounts[c.Account.ID] = accountTermsOf(c.Account)
		}
	}
}

// diff names what differs between the engine's view and the database's.
func (v markingView) diff(want markingView) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want.Instruments)) {
		if got := v.Instruments[k]; got != want.Instruments[k] {
			out = append(out, fmt.Sprintf("instrument %s: engine %+v, database %+v", k, got, want.Instruments[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Groups)) {
		if !maps.Equal(v.Groups[k], want.Groups[k]) {
			out = append(out, fmt.Sprintf("group %s's symbol terms: engine %+v, database %+v", k, v.Groups[k], want.Groups[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.Groups)) {
		if _, ok := want.Groups[k]; !ok {
			out = append(out, fmt.Sprintf("group %s's symbol terms: engine %+v, database none", k, v.Groups[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.Accounts)) {
		if got := v.Accounts[k]; !reflect.DeepEqual(got, want.Accounts[k]) {
			out = append(out, fmt.Sprintf("account %d: engine %+v, database %+v", k, got, want.Accounts[k]))
		}
	}
	return out
}

// markingWrites replaces the walk's valid request where auditedWrites' request changes nothing
// the engine marks with, so that the walk exercises a change that does.
var markingWrites = map[string]struct{ path, body string }{
	"PUT /api/admin/fx/symbol-groups/{name}":    {"/api/admin/fx/symbol-groups/majors", `{"markupPoints":"3","hedgedMarginRate":"0.4"}`},
	"PATCH /api/admin/fx/account-groups/{name}": {"/api/admin/fx/account-groups/walk-move", `{"stopOutLevel":"70","marginCallLevel":"120","leverageMax":40}`},
}

// Every admin write route, walked over the real router: after each valid request the holder's
// terms follower reads the audit log once, and the terms the risk engine would then hold must be
// those a holder booting now would load. A route whose change alters how accounts are marked
// without reaching the engine — a new route, or a new kind of audit row the follower does not
// read — fails here, naming what differs.
func TestEveryAdminWriteReachesTheRiskEngine(t *testing.T) {
	d, h := newAuditDesk(t)
	d.fixtures()
	engine := markingViewOf(t, d.svc)
	follower, err := catalog.NewTermsFollower(catalog.TermsFollowerConfig{DB: d.db, Cache: catalog.NewCache(d.db, time.Minute),
		Apply: func(_ context.Context, cs ...risk.Change) { engine.apply(cs...) }})
	if err != nil {
		t.Fatal(err)
	}
	pass := func() {
		t.Helper()
		if err := follower.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	pass()
	if diff := engine.diff(markingViewOf(t, d.svc)); len(diff) > 0 {
		t.Fatalf("before the walk:\n  %s", strings.Join(diff, "\n  "))
	}
	changed := 0
	err = chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := method + " " + strings.TrimSuffix(route, "/")
		w, ok := auditedWrites[key]
		if !ok || method == http.MethodGet {
			return nil // not an admin write, or one TestEveryAdminWriteIsAudited accounts for otherwise
		}
		path, body := w.path(d), w.body(d)
		if m, ok := markingWrites[key]; ok {
			path, body = m.path, m.body
		}
		before := markingViewOf(t, d.svc)
		if code, answer, _ := d.do(method, path, body); code < 200 || code >= 300 {
			t.Errorf("%s: the valid request answered %d %s", key, code, answer)
			return nil
		}
		pass()
		now := markingViewOf(t, d.svc)
		if len(before.diff(now)) > 0 {
			changed++
		}
		if diff := engine.diff(now); len(diff) > 0 {
			t.Errorf("%s changed how accounts are marked, and the risk engine was not told:\n  %s", key, strings.Join(diff, "\n  "))
			engine = now // judge the next route alone
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk is only worth something if it changed marking: a move, a group's levels, an
	// instrument, a symbol group, overrides set and removed.
	if changed < 6 {
		t.Fatalf("only %d routes of the walk changed how accounts are marked: it is not testing the path", changed)
	}
}
