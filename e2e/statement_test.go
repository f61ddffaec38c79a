package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/swaps"
)

// statementJSON is what the test reads of a statement.
type statementJSON struct {
	Statement struct {
		FrozenThrough string `json:"frozenThrough"`
		Reconciled    bool   `json:"reconciled"`
		Opening       struct {
			Balance string `json:"balance"`
		} `json:"opening"`
		Closing struct {
			Balance string  `json:"balance"`
			Equity  *string `json:"equity"`
		} `json:"closing"`
		Totals struct {
			Deposits, Withdrawals, Profit, Swaps, Commissions, Adjustments, Net string
		} `json:"totals"`
		Deals []struct {
			ID             int64  `json:"id"`
			RunningBalance string `json:"runningBalance"`
			BalanceAfter   string `json:"balanceAfter"`
		} `json:"deals"`
		ClosedPositions []json.RawMessage `json:"closedPositions"`
		OpenPositions   struct {
			Count int `json:"count"`
		} `json:"openPositions"`
	} `json:"statement"`
}

// A trader's statement of a day of about a hundred deals — fills and closes through the desk,
// frozen by the real fxdesk-cron at the day's rollover — opened in Chromium: the page shows the
// JSON's totals, runs no script, and printed to A4 its deals take about one page per forty,
// each page of them under the repeated header row.
func TestStatementPrintsInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	d := newSplitDesk(t, unlimitedRates...)
	tok, acct := d.newTrader(301, "USD", "100", "50000")
	d.setQuote(tok, "EURUSD", "1.08000", "1.08020")
	const trips = 50 // each a commission and a close: with the deposit, 101 deals
	for range trips {
		pos := d.open(tok, acct, "EURUSD", "BUY", "0.10")
		must(t, d.web, tok, "POST", fmt.Sprintf("/api/fx/positions/%d/close", pos), "", http.StatusOK, nil)
	}
	d.open(tok, acct, "EURUSD", "SELL", "0.20") // open at the close: its commission and a swap
	d.waitPublished()
	day := firstWeekdayRolloverAfter(time.Now())
	if got := d.e.cronRun(swaps.JobName, day.At.Add(time.Minute)); got["daysFrozen"] != 1 {
		t.Fatalf("the cron's run at %s's rollover froze %v", day.Date, got)
	}
	path := fmt.Sprintf("/api/fx/accounts/%d/statement?from=%s&to=%s", acct, day.Date, day.Date)
	var st statementJSON
	must(t, d.web, tok, "GET", path, "", http.StatusOK, &st)
	s := st.Statement
	if n := len(s.Deals); n < 2*trips+2 || !s.Reconciled || s.FrozenThrough != day.Date || len(s.ClosedPositions) != trips || s.OpenPositions.Count != 1 {
		t.Fatalf("the day's statement: %d deals, reconciled %v, frozen through %s, %d closed, %d open", n, s.Reconciled, s.FrozenThrough,
			len(s.ClosedPositions), s.OpenPositions.Count)
	}

	tab := openTab(t, browser)
	tab.call("Network.enable", nil)
	tab.call("Network.setExtraHTTPHeaders", map[string]any{"headers": map[string]string{"Authorization": "Bearer " + tok}})
	tab.load("http://" + d.web.addr + path + "&format=html")
	text := func(id string) string { return tab.eval("document.getElementById(" + jsString(id) + ").textContent") }
	for id, want := range map[string]string{"opening-balance": s.Opening.Balance, "closing-balance": s.Closing.Balance, "total-net": s.Totals.Net,
		"total-deposits": s.Totals.Deposits, "total-profit": s.Totals.Profit, "total-commissions": s.Totals.Commissions, "total-swaps": s.Totals.Swaps,
		"closing-equity": *s.Closing.Equity, "deal-count": strconv.Itoa(len(s.Deals)), "open-count": "1", "frozen-through": day.Date} {
		if got := text(id); got != want {
			t.Errorf("the page's %s is %q, the JSON's %q", id, got, want)
		}
	}
	if rows := tab.eval("document.querySelectorAll('#deals tbody tr').length"); rows != strconv.Itoa(len(s.Deals)+2) {
		t.Errorf("the page lists %s deal rows, want %d and the opening and closing lines", rows, len(s.Deals))
	}
	if scripts := tab.eval("document.scripts.length"); scripts != "0" {
		t.Errorf("the page carries %s scripts", scripts)
	}

	var pdf struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(tab.call("Page.printToPDF", map[string]any{"paperWidth": 8.27, "paperHeight": 11.69, "printBackground": true}), &pdf); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(pdf.Data)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "statement.pdf")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	pages, err := pdfPages(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	// The first page is the summary; the deals follow on pages of their own, each row printed
	// once, each page of them under the header row; the closed and open positions after them.
	squeeze := func(s string) string { return strings.Join(strings.Fields(s), "") }
	// A deal's type names its row: no other text on the page is in capitals. Letters a font
	// kerns are written apart (S W AP), so the words are counted with the spaces squeezed out.
	rowsOn := func(page string) int {
		page, n := squeeze(page), 0
		for _, typ := range []string{"DEPOSIT", "WITHDRAWAL", "COMMISSION", "PROFIT", "SWAP", "ADJUSTMENT"} {
			n += strings.Count(page, typ)
		}
		return n
	}
	if len(pages) == 0 || rowsOn(pages[0]) != 0 || !strings.Contains(squeeze(pages[0]), "Closingbalance("+day.Date+")"+s.Closing.Balance) {
		t.Fatalf("the first page is not the summary:\n%v", pages)
	}
	printed, dealPages := 0, 0
	header := squeeze("Deal Time (UTC) Type Symbol Side Volume Price Position Amount Running balance")
	for i, page := range pages {
		n := rowsOn(page)
		if n == 0 {
			continue
		}
		dealPages++
		printed += n
		if !strings.Contains(squeeze(page), header) {
			t.Errorf("page %d of the deals (%d rows) has no header row:\n%s", i+1, n, page)
		}
		if last := printed == len(s.Deals); !last && (n < 30 || n > 50) {
			t.Errorf("page %d holds %d deals, want about forty", i+1, n)
		}
	}
	t.Logf("%d deals on %d of %d A4 pages (%s, %d bytes)", len(s.Deals), dealPages, len(pages), file, len(raw))
	if printed != len(s.Deals) {
		t.Errorf("the PDF prints %d deal rows of %d", printed, len(s.Deals))
	}
	if lo, hi := (len(s.Deals)+49)/50, (len(s.Deals)+29)/30; dealPages < lo || dealPages > hi || len(pages) > 1+dealPages+3 {
		t.Errorf("%d deals take %d pages (want %d to %d) of %d", len(s.Deals), dealPages, lo, hi, len(pages))
	}
}
