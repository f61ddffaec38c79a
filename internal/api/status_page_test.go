package api

import (
	"bytes"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/alert"
	"fxdesk/internal/audit"
	"fxdesk/internal/book"
	"fxdesk/internal/desk"
	"fxdesk/internal/fx"
	"fxdesk/internal/mirror"
	"fxdesk/internal/schedule"
	"fxdesk/internal/trading"
)

// The status page renders every section it has without a template error: html/template checks
// field names only when it executes, so a renamed field would otherwise surface as an empty page
// in production and in the browser test alone.
func TestStatusPageRendersEverySection(t *testing.T) {
	now := time.Now()
	age := int64(120)
	r := report{
		Status: desk.Status{Process: "web", Role: desk.Holder, Reason: "won the engine lease at boot", ThisProcess: "box:1", CronMode: "off", Takeover: "standby",
			Lease:  &desk.LeaseView{Key: "forex-trading", Trusted: true, Term: 3, TrustLeftMs: 9000, Lost: true, FailOpen: true},
			Holder: desk.HolderView{Row: &desk.RowView{Hostname: "box", PID: 1, Term: 3, Live: true, ExpiresInMs: 15000}, Redis: "box:1", Agree: true},
			Mirror: &mirror.Status{Mode: mirror.Publishing}, Time: now},
		Feed:    &feedView{Connected: true, ConnectedSince: &now, LastTickAgeMs: &age},
		Jobs:    []schedule.JobState{{Name: "processFxSwaps"}},
		Risk:    &riskView{Loaded: true},
		Commits: &book.CommitStats{Batches: 3, Writes: 7, Refused: 1, OneTrip: 2, Stale: 1},
		Alerts:  []alert.Alert{{Code: "ledger-drift", Message: "Σ deals differs from balance"}},
		Book: &bookView{NBPToday: &nbpToday{Since: now, Costs: []trading.NBPCost{{Currency: "USD", Resets: 2, Amount: "513.50"}}},
			Symbols: []bookSymbol{{Symbol: "EURUSD", BBookNetLots: "-1.5", ABookLots: "0.2"}}, ExposuresAt: time.Date(2026, 12, 7, 19, 4, 5, 0, time.UTC)},
	}
	var page bytes.Buffer
	if err := statusPage.Execute(&page, r); err != nil {
		t.Fatalf("status page: %v", err)
	}
	for _, want := range []string{"holds the lease", "LEASE LOST", "FXDESK_TAKEOVER=<span id=\"takeover\">standby", "ledger-drift", "processFxSwaps",
		"2 batches on remembered accounts · 1 found a row changed", "513.50 USD over 2 resets",
		"<td>EURUSD</td><td>-1.5</td><td>0.2</td>", `lots as read at <time datetime="2026-12-07T19:04:05.000Z">19:04:05</time> UTC`} {
		if !bytes.Contains(page.Bytes(), []byte(want)) {
			t.Errorf("status page lacks %q", want)
		}
	}
}

// The status page lists the audit log's latest entries: when, who, what, on which entity.
func TestStatusPageShowsTheAuditLog(t *testing.T) {
	user, token, req := int64(7), int64(3), "req-42"
	r := report{Status: desk.Status{Process: "web", Role: desk.Holder, Time: time.Now()},
		Audit: []audit.Entry{{ID: 9, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ActorUserID: &user, ActorTokenID: &token, ActorVia: "api",
			Action: "instrument.update", EntityType: "instrument", EntityID: "EURUSD", RequestID: &req}}}
	var page bytes.Buffer
	if err := statusPage.Execute(&page, r); err != nil {
		t.Fatalf("status page: %v", err)
	}
	for _, want := range []string{"2026-01-02 03:04:05", "api · user 7 · token 3", "<code>instrument.update</code>", "instrument EURUSD", "<code>req-42</code>"} {
		if !bytes.Contains(page.Bytes(), []byte(want)) {
			t.Errorf("status page lacks %q:\n%s", want, page.String())
		}
	}
	r.Audit, r.AuditError = nil, "database down"
	page.Reset()
	if err := statusPage.Execute(&page, r); err != nil || !bytes.Contains(page.Bytes(), []byte("audit log unreadable: database down")) {
		t.Errorf("status page with the log unreadable: %v", err)
	}
}

// The money requests awaiting a second approval are on the page of a role that may approve them,
// and absent from every other's (the handler leaves Money nil).
func TestStatusPageShowsPendingMoneyToFinanceOnly(t *testing.T) {
	r := report{Status: desk.Status{Process: "web", Role: desk.Holder, Time: time.Now()},
		Money: &moneyPanel{Pending: []trading.MoneyRequest{{ID: 12, AccountID: 3, Kind: fx.DealDeposit, Amount: decimal.RequireFromString("25000.00"),
			Currency: "USD", RequestedBy: 7, ExpiresAt: time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC), Comment: "wire 4711"}}}}
	var page bytes.Buffer
	if err := statusPage.Execute(&page, r); err != nil {
		t.Fatalf("status page: %v", err)
	}
	for _, want := range []string{`id="money-requests"`, "25000 USD", "user 7", "wire 4711"} {
		if !bytes.Contains(page.Bytes(), []byte(want)) {
			t.Errorf("a finance user's status page lacks %q", want)
		}
	}
	r.Money = nil
	page.Reset()
	if err := statusPage.Execute(&page, r); err != nil || bytes.Contains(page.Bytes(), []byte(`id="money-requests"`)) {
		t.Errorf("a role that cannot approve sees the money requests (%v)", err)
	}
}
