package invariant

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/auth"
	"fxdesk/internal/fx"
)

// Every 2xx in the journal is in the database as answered.
func checkAnswersInDB(s *Snapshot, ev *Evidence) Result {
	r := Result{Name: "answersInDB"}
	orders := map[int64]dbOrder{}
	for _, o := range s.Orders {
		orders[o.ID] = o
	}
	positions := map[int64]dbPosition{}
	for _, p := range s.Positions {
		positions[p.ID] = p
	}
	deals := map[int64]dbDeal{}
	for _, d := range s.Deals {
		deals[d.ID] = d
	}
	fills := nettedFills(s, nettedAccounts(s))
	n := 0
	for _, e := range ev.Journal {
		if !e.OK() || e.Method != http.MethodPost || !e.End.Before(s.Taken) {
			continue
		}
		var b struct {
			Order *struct {
				ID           int64  `json:"id"`
				AccountID    int64  `json:"accountId"`
				RequestNonce string `json:"requestNonce"`
				Status       string `json:"status"`
			} `json:"order"`
			Position *struct {
				ID     int64  `json:"id"`
				Volume string `json:"volume"`
			} `json:"position"`
			Deal *struct {
				ID     int64  `json:"id"`
				Amount string `json:"amount"`
			} `json:"deal"`
		}
		if !e.Decode(&b) {
			continue
		}
		n++
		switch {
		case strings.HasPrefix(e.Op, "open"):
			if b.Order == nil {
				r.Add("", "journal %d: %s answered %d without an order", e.Seq, e.Op, e.Status)
				continue
			}
			o, ok := orders[b.Order.ID]
			// An EXTERNAL order answered SENDING (a replay while its venue answer was unknown)
			// has moved on since: the reconciler filled it, or found it never reached the venue.
			moved := b.Order.Status == "SENDING" && (o.Status == "FILLED" || o.Status == "NOT_SENT" || o.Status == "REJECTED")
			// A resting order (LIMIT, STOP, STOP_LIMIT) answered PENDING may have ended since: its
			// trigger filled it (or rejected it), its trader or its OCO partner cancelled it, or it expired.
			moved = moved || b.Order.Status == "PENDING" && (o.Status == "FILLED" || o.Status == "REJECTED" || o.Status == "CANCELLED" || o.Status == "EXPIRED")
			if !ok || o.Account != b.Order.AccountID || o.Nonce.String != b.Order.RequestNonce || (o.Status != b.Order.Status && !moved) {
				r.Add("", "journal %d: order %d (nonce %s, %s) answered %d, database has %+v (found %v)", e.Seq, b.Order.ID, b.Order.RequestNonce, b.Order.Status, e.Status, o, ok)
			}
			if b.Position != nil {
				// A netted account's fill answers the position it left (check_netted.go).
				f, netted := fills[b.Order.ID]
				if p, ok := positions[b.Position.ID]; !ok || (p.Order != b.Order.ID && !(netted && p.Account == b.Order.AccountID && p.ID == f.result)) {
					r.Add("", "journal %d: position %d of order %d answered %d, not in the database", e.Seq, b.Position.ID, b.Order.ID, e.Status)
				}
			}
		case b.Deal != nil:
			d, ok := deals[b.Deal.ID]
			amt, _ := decimal.NewFromString(b.Deal.Amount)
			if !ok || !d.Amount.Equal(amt) {
				r.Add("", "journal %d: %s %s answered %d with deal %d amount %s; database has %v (found %v)", e.Seq, e.Op, e.Path, e.Status, b.Deal.ID, b.Deal.Amount, d.Amount, ok)
			}
		}
	}
	r.Figures = fmt.Sprintf("%d 2xx answers checked", n)
	return r
}

// No 5xx but the documented 503 texts. Answers alike (status and text, less than 5 s apart) are
// one row with their count, routes, journal numbers and the faults they fell in; journal.jsonl
// has each.
func checkNo5xx(ev *Evidence) Result {
	r := Result{Name: "no5xx"}
	allowed, unknowns, total := 0, 0, 0
	type group struct {
		first, last Entry
		msg         string
		n           int
		routes      map[string]int
	}
	groups := map[string]*group{} // the open episode of each status and text
	var order []*group
	for _, e := range ev.Journal {
		total++
		if e.Outcome == OutcomeUnknown {
			unknowns++
		}
		if e.Outcome != Answered || e.Status < 500 {
			continue
		}
		msg := e.ErrorMessage()
		// The documented 5xx: a process that cannot quote, a database it cannot reach (nothing was
		// written), and a write whose outcome is unknown (its COMMIT's connection died; a replay
		// with the same nonce is safe — the answered-in-the-database check treats it as unknown).
		// An EXTERNAL trader's request may also meet the venue down (nothing was sent) or a venue
		// answer that never came (the reconciler books what the venue did).
		venueAnswer := ev.External[e.Client] && ((e.Status == http.StatusServiceUnavailable && msg == fx.MsgVenueUnavailable) ||
			(e.Status == http.StatusGatewayTimeout && msg == fx.MsgVenueOutcomeUnknown))
		// A holder whose risk view is still loading (a boot or a takeover) takes no new orders
		// and writes nothing (docs/boot.md).
		// The front door's: a write that met contention on every retry (nothing was written), and
		// every token lookup slot taken by a flood of unknown tokens (unavailableBeforeAnything).
		if (e.Status == http.StatusServiceUnavailable && (msg == fx.MsgPricingUnavailable || msg == fx.MsgPositionsUnpriceable || msg == fx.MsgContended || msg == fx.MsgRiskViewLoading)) ||
			unavailableBeforeAnything(e) || (e.Status == http.StatusGatewayTimeout && msg == fx.MsgOutcomeUnknown) || venueAnswer {
			allowed++
			continue
		}
		if msg == "" {
			msg = Truncate(string(e.Resp), 120)
		}
		// An episode: answers alike with less than 5 s between them. Its first journal entry
		// names it, so a later check extends the same row.
		kind := fmt.Sprintf("%d %q", e.Status, msg)
		g := groups[kind]
		if g == nil || e.Start.Sub(g.last.End) > 5*time.Second {
			g = &group{first: e, msg: msg, routes: map[string]int{}}
			groups[kind] = g
			order = append(order, g)
		}
		g.n++
		g.last = e
		g.routes[e.Method+" "+route(e.Path)]++
	}
	for _, g := range order {
		var routes []string
		for rt, n := range g.routes {
			routes = append(routes, fmt.Sprintf("%s ×%d", rt, n))
		}
		slices.Sort(routes)
		r.Add(fmt.Sprintf("5xx from %d", g.first.Seq), "%d answers %d %q, %s–%s (%s), journal %d…%d: %s", g.n, g.first.Status, g.msg,
			TimeOfDay(g.first.Start), TimeOfDay(g.last.End), ev.during(g.first.Start, g.last.End), g.first.Seq, g.last.Seq, strings.Join(routes, ", "))
	}
	r.Figures = fmt.Sprintf("%d requests, %d documented 503s, %d outcome unknown", total, allowed, unknowns)
	return r
}

// unavailableBeforeAnything reports whether e is a documented 503 a request can meet before its
// token is resolved: the database unreachable, or every token lookup slot taken by a flood of
// unknown tokens. Nothing was done, and the guards never saw the request.
func unavailableBeforeAnything(e Entry) bool {
	if e.Outcome != Answered || e.Status != http.StatusServiceUnavailable {
		return false
	}
	msg := e.ErrorMessage()
	return msg == fx.MsgDatabaseUnavailable || msg == fx.ErrorMessage(auth.ErrBusy)
}

// route is a request path with its ids and query left out: /api/fx/positions/{id}/close.
func route(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if _, err := strconv.ParseInt(p, 10, 64); err == nil {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}

// tradesAgain: an order filled within 30 s after the last fault ended — or after the first open
// sent since, when the soak asked later (the probe after the load). A fill is an open the desk
// answered 2xx, or one whose answer the client never had (a timeout on a loaded machine, a 504)
// whose requestNonce names an order the snapshot (s; nil: none read) holds FILLED — the desk
// filled it, at its position's openedAt. When nothing filled, the violation says what the opens
// sent after the fault got: a holder still loading its risk view answers 503 "The desk is starting
// its risk engine…" (docs/boot.md, «Ready means watched») until it watches every position, which
// tells a takeover still loading from a desk that stalled.
func CheckTradesAgain(s *Snapshot, ev *Evidence, lastFault time.Time) Result {
	r := Result{Name: "tradesAgain"}
	if lastFault.IsZero() {
		r.Figures = "no fault injected"
		return r
	}
	filled := map[string]time.Time{} // requestNonce → when its order's position opened
	if s != nil {
		orders := map[int64]string{}
		for _, o := range s.Orders {
			if o.Status == "FILLED" && o.Nonce.Valid {
				orders[o.ID] = o.Nonce.String
			}
		}
		for _, p := range s.Positions {
			if n, ok := orders[p.Order]; ok {
				filled[n] = p.OpenedAt
			}
		}
	}
	var first, asked time.Time
	var seq int64
	answers := map[string]int{}
	for _, e := range ev.Journal {
		if !strings.HasPrefix(e.Op, "open") || !e.Start.After(lastFault) {
			continue
		}
		if asked.IsZero() || e.Start.Before(asked) {
			asked = e.Start
		}
		at := time.Time{}
		switch {
		case e.OK():
			at = e.End
		case e.Outcome != Answered || e.Status == http.StatusGatewayTimeout:
			var b struct {
				RequestNonce string `json:"requestNonce"`
			}
			// Filled after the fault: an earlier attempt under the same nonce may have filled it
			// before.
			if json.Unmarshal(e.Body, &b) == nil && filled[b.RequestNonce].After(lastFault) {
				at = filled[b.RequestNonce]
			}
		}
		if !at.IsZero() {
			if first.IsZero() || at.Before(first) {
				first, seq = at, e.Seq
			}
			continue
		}
		what := e.Outcome
		if e.Outcome == Answered {
			what = fmt.Sprintf("%d %q", e.Status, e.ErrorMessage())
		}
		answers[what]++
	}
	if first.IsZero() {
		r.Figures = "no fill after the last fault"
		r.Add("", "no order filled after the last fault ended at %s; the opens sent since: %s", TimeOfDay(lastFault), countsText(answers))
		return r
	}
	// The 30 s run from when the desk was first asked after the fault: the load may have
	// stopped with the last fault, and the probe begins only once the admin lane has put the
	// accounts back, which a loaded machine can take minutes over.
	from := lastFault
	if asked.After(from) {
		from = asked
	}
	took := first.Sub(from)
	r.Figures = fmt.Sprintf("first fill %s after the last fault ended (%s)", first.Sub(lastFault).Round(time.Millisecond), TimeOfDay(lastFault))
	if from.After(lastFault) {
		r.Figures += fmt.Sprintf(", %s after the first open sent since (%s)", took.Round(time.Millisecond), TimeOfDay(from))
	}
	if took > 30*time.Second {
		r.Add("", "the desk first filled an order %s after %s (journal %d); the opens before it: %s", took.Round(time.Millisecond), sinceText(from, lastFault), seq, countsText(answers))
	}
	return r
}

func sinceText(from, lastFault time.Time) string {
	if from.Equal(lastFault) {
		return "the last fault"
	}
	return "the first open sent after the last fault (" + TimeOfDay(from) + ")"
}

// countsText lists counts by what, most first.
func countsText(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%d× %s", counts[k], k))
	}
	return strings.Join(out, ", ")
}
