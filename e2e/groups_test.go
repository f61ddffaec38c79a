package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/swaps"
)

// auditEntry is one row of GET /api/admin/fx/audit.
type auditEntry struct {
	ActorUserID *int64          `json:"actorUserId"`
	ActorVia    string          `json:"actorVia"`
	Action      string          `json:"action"`
	EntityType  string          `json:"entityType"`
	EntityID    string          `json:"entityId"`
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	RequestID   *string         `json:"requestId"`
}

// audit reads the audit rows of one entity through the admin API, newest first.
func (d *tradingDesk) audit(entityType, entityID string) []auditEntry {
	d.e.t.Helper()
	var out struct{ Entries []auditEntry }
	q := url.Values{"entityType": {entityType}, "entityId": {entityID}}
	must(d.e.t, d.web, d.admin, "GET", "/api/admin/fx/audit?"+q.Encode(), "", http.StatusOK, &out)
	return out.Entries
}

// wantAudit asserts entity's audit rows hold exactly one of action, by the admin (user 1) over the
// API with a request id, whose after names each of afterHas.
func (d *tradingDesk) wantAudit(entityType, entityID, action string, afterHas ...string) {
	t := d.e.t
	t.Helper()
	var found []auditEntry
	for _, e := range d.audit(entityType, entityID) {
		if e.Action == action {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("audit %s %s: %d %s rows, want 1", entityType, entityID, len(found), action)
	}
	e := found[0]
	if e.ActorUserID == nil || *e.ActorUserID != 1 || e.ActorVia != "api" || e.RequestID == nil || *e.RequestID == "" {
		t.Fatalf("audit %s %s %s: actor user %v via %q request %v, want the admin (user 1) via api with a request id",
			entityType, entityID, action, e.ActorUserID, e.ActorVia, e.RequestID)
	}
	for _, s := range afterHas {
		if !strings.Contains(string(e.After), s) {
			t.Fatalf("audit %s %s %s: after %s does not hold %s", entityType, entityID, action, e.After, s)
		}
	}
}

// An account group's symbol overrides at work, set over HTTP by an admin and read back from what
// the real processes did: a trader's funded account holding a GBPUSD position moves into a group
// that gives it, on EURUSD, 10 points of markup, 3 USD a lot, swaps of −2 long and +1.5 short and
// 1:30 at most, and makes GBPUSD close-only. Its EURUSD fills and closes carry the markup, its commission
// deals the override's rate, its margin the 1:30, its swap charges from `fxdesk-cron run
// processFxSwaps` the override's points — every figure differs from the defaults (no markup, 7
// USD a lot, −7.5 / +2.2, the account's 1:100). A new GBPUSD position is refused while the one
// it holds closes. Each admin write left its audit row.
func TestDealerGroupOverridesApplyEverywhere(t *testing.T) {
	t.Parallel()
	d := newSplitDesk(t)
	waitRiskReady(d.web)
	tok, acct := d.newTrader(2500, "USD", "100", "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.setQuote(tok, "GBPUSD", "1.25000", "1.25030")

	// In the default group: GBPUSD at the ask, 7 USD a lot.
	gbp := d.open(tok, acct, "GBPUSD", "BUY", "0.10")
	d.checkLedger(acct, "9999.30")

	// The dealer's side, over HTTP.
	var g struct {
		AccountGroup struct {
			Name        string `json:"name"`
			LeverageMax int    `json:"leverageMax"`
		} `json:"accountGroup"`
	}
	must(t, d.web, d.admin, "POST", "/api/admin/fx/account-groups", `{"name":"vip-e2e"}`, http.StatusCreated, &g)
	if g.AccountGroup.Name != "vip-e2e" || g.AccountGroup.LeverageMax != 500 {
		t.Fatalf("created group %+v, want vip-e2e at the default 1:500", g.AccountGroup)
	}
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/account-groups/vip-e2e/overrides/symbols/EURUSD",
		`{"markupPoints":"10","commissionPerLot":"3","commissionCurrency":"USD","swapLong":"-2","swapShort":"1.5","leverageMax":30}`, http.StatusCreated, nil)
	must(t, d.web, d.admin, "PUT", "/api/admin/fx/account-groups/vip-e2e/overrides/symbols/GBPUSD", `{"tradeMode":"CLOSE_ONLY"}`, http.StatusCreated, nil)
	var moved struct {
		Account struct {
			Group string `json:"group"`
			State string `json:"state"`
		} `json:"account"`
	}
	must(t, d.web, d.admin, "POST", fmt.Sprintf("/api/admin/fx/accounts/%d/group", acct), `{"group":"vip-e2e"}`, http.StatusOK, &moved)
	if moved.Account.Group != "vip-e2e" || moved.Account.State != "ACTIVE" {
		t.Fatalf("moved account %+v", moved.Account)
	}

	// Support's view of the resolved terms, and where each came from.
	var eff struct {
		AccountGroup string `json:"accountGroup"`
		Terms        []struct {
			Symbol, MarkupPoints, CommissionPerLot, SwapLong, SwapShort, TradeMode string
			LeverageMax                                                            int
			From                                                                   map[string]string
		} `json:"terms"`
	}
	must(t, d.web, d.admin, "GET", fmt.Sprintf("/api/admin/fx/accounts/%d/effective?symbol=EURUSD", acct), "", http.StatusOK, &eff)
	if len(eff.Terms) != 1 || eff.AccountGroup != "vip-e2e" {
		t.Fatalf("effective terms %+v", eff)
	}
	if e := eff.Terms[0]; e.MarkupPoints != "10" || e.CommissionPerLot != "3" || e.SwapLong != "-2" || e.SwapShort != "1.5" || e.LeverageMax != 30 ||
		e.TradeMode != "FULL" || e.From["markupPoints"] != "override:symbol" || e.From["leverageMax"] != "override:symbol" {
		t.Fatalf("effective EURUSD terms %+v", e)
	}

	// Close-only GBPUSD: no new position, while the one held closes at the bid (its symbol
	// group's markup, none): (1.25000 − 1.25030) × 10,000 = −3.00.
	var refusal errorResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"GBPUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct),
		http.StatusConflict, &refusal)
	if !strings.Contains(refusal.Error.Message, "GBPUSD is close-only for this account's group") {
		t.Fatalf("close-only refusal %+v", refusal.Error)
	}
	var cl closeResp
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", gbp), "", http.StatusOK, &cl)
	if cl.Position.Status != "CLOSED" || cl.Deal.Amount != "-3.00" {
		t.Fatalf("GBPUSD close = %+v", cl)
	}
	wantClose(t, "GBPUSD position", d.waitClosed(gbp), "CLIENT", "1.25000")
	d.checkLedger(acct, "9996.30")

	// EURUSD long: the ask plus 10 points, 3 USD a lot.
	var o orderResp
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"BUY","type":"MARKET","volume":"0.10"}`, acct),
		http.StatusCreated, &o)
	if o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(dec("1.10030")) || o.Commission == nil || o.Commission.Amount != "-0.30" {
		t.Fatalf("EURUSD buy: fill %v commission %+v, want 1.10030 and −0.30", o.Order.FillPrice, o.Commission)
	}
	long := o.Position.ID
	d.checkLedger(acct, "9996.00")
	// Margin at 1:30: 0.10 × 100,000 × mid 1.10010 ÷ 30 = 366.70 (1:100 would be 110.01). The
	// long is marked at the bid less the markup: (1.09990 − 1.10030) × 10,000 = −4.00.
	if a := d.account(tok, acct).Account; a.UsedMargin != "366.70" || a.Equity != "9992.00" {
		t.Fatalf("account after the long: used margin %s equity %s, want 366.70 and 9992.00", a.UsedMargin, a.Equity)
	}

	// EURUSD short: the bid less 10 points.
	must(t, d.web, tok, "POST", "/api/fx/orders", fmt.Sprintf(`{"accountId":%d,"symbol":"EURUSD","side":"SELL","type":"MARKET","volume":"0.20"}`, acct),
		http.StatusCreated, &o)
	if o.Order.FillPrice == nil || !dec(*o.Order.FillPrice).Equal(dec("1.09990")) || o.Commission == nil || o.Commission.Amount != "-0.60" {
		t.Fatalf("EURUSD sell: fill %v commission %+v, want 1.09990 and −0.60", o.Order.FillPrice, o.Commission)
	}
	short := o.Position.ID
	d.checkLedger(acct, "9995.40")

	// One rollover by the real fxdesk-cron: points per lot per night from the override,
	// 0.10 × 100,000 × −2 × 0.00001 = −0.20 long and 0.20 × 100,000 × 1.5 × 0.00001 = 0.30 short
	// (the instrument's would be −0.75 and 0.44), tripled on EURUSD's Wednesday.
	d.waitPublished()
	ro := firstWeekdayRolloverAfter(time.Now())
	days := decimal.NewFromInt(int64(swaps.DayMultiplier(ro.Weekday(), time.Wednesday)))
	if got := d.e.cronRun(swaps.JobName, ro.At.Add(time.Hour)); got["charged"] != 2 {
		t.Fatalf("swap run as of %s: %v, want 2 charged", ro.Date, got)
	}
	for _, c := range []struct {
		pos  int64
		want decimal.Decimal
	}{{long, dec("-0.20").Mul(days)}, {short, dec("0.30").Mul(days)}} {
		deals := d.e.swapDeals(c.pos)
		if got, ok := deals[ro.Date]; len(deals) != 1 || !ok || !got.Equal(c.want) {
			t.Fatalf("position %d swap deals %v, want %s on %s", c.pos, deals, c.want, ro.Date)
		}
	}
	afterSwaps := dec("9995.40").Add(dec("0.10").Mul(days))
	d.checkLedger(acct, afterSwaps.StringFixed(2))

	// A close is priced under the group too: the long closes at the bid less 10 points,
	// (1.09990 − 1.10030) × 10,000 = −4.00.
	must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", long), "", http.StatusOK, &cl)
	if cl.Deal.Amount != "-4.00" {
		t.Fatalf("EURUSD long close = %+v, want a deal of −4.00", cl)
	}
	wantClose(t, "EURUSD long", d.waitClosed(long), "CLIENT", "1.09990")
	d.checkLedger(acct, afterSwaps.Sub(dec("4.00")).StringFixed(2))
	d.e.checkAllLedgers()

	// Every admin write left its one audit row, naming the admin.
	d.wantAudit("account_group", "vip-e2e", "account_group.create", `"vip-e2e"`)
	d.wantAudit("symbol_override", "vip-e2e/EURUSD", "symbol_override.create", `"10"`, `"-2"`, `"1.5"`, `30`)
	d.wantAudit("symbol_override", "vip-e2e/GBPUSD", "symbol_override.create", `"CLOSE_ONLY"`)
	d.wantAudit("account", fmt.Sprint(acct), "account.move", `"vip-e2e"`)
	d.wantAudit("account", fmt.Sprint(acct), "account.deposit")
}
