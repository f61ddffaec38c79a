package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"fxdesk/internal/lease"
	"fxdesk/internal/redisname"
	"fxdesk/internal/testkit/dbtest"
)

// rail is an open markets rail (server-sent events) of one process.
type rail struct {
	t    *testing.T
	name string
	sc   *bufio.Scanner
}

// openRail opens p's markets rail for symbol and returns once it has greeted, that is once the
// subscription is registered; it is closed when the test ends.
func openRail(t *testing.T, p *proc, tok, symbol string) *rail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/api/fx/markets/stream?symbols="+symbol, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s markets rail = %d", p.name, resp.StatusCode)
	}
	r := &rail{t: t, name: p.name, sc: bufio.NewScanner(resp.Body)}
	if !r.sc.Scan() {
		t.Fatalf("%s markets rail closed before its greeting", p.name)
	}
	return r
}

// until reads the rail until it shows symbol at bid, and returns every bid it showed before.
func (r *rail) until(symbol, bid string) []string {
	r.t.Helper()
	var before []string
	for r.sc.Scan() {
		line, ok := strings.CutPrefix(r.sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct{ Symbol, Bid string }
		json.Unmarshal([]byte(line), &ev)
		if ev.Symbol != symbol {
			continue
		}
		if ev.Bid == bid {
			return before
		}
		before = append(before, ev.Bid)
	}
	r.t.Fatalf("%s markets rail never showed %s at %s (showed %v)", r.name, symbol, bid, before)
	return nil
}

// Two installs on one Redis server and database — production with the default prefix, staging
// with FXDESK_REDIS_PREFIX=staging, each a holder and a follower web process with its own MySQL
// database and its own feed — do not see each other: each follower's rail shows only its own
// holder's ticks, each holder's quote mirror snapshot is its own, and each lease key names its
// own holder, so each desk's status finds Redis agreeing with its row.
func TestTwoInstallsOnOneRedisServerDoNotSeeEachOther(t *testing.T) {
	t.Parallel()
	r, err := dbtest.StartRedis()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	stagingNames, err := redisname.New("staging")
	if err != nil {
		t.Fatal(err)
	}
	// CRON_MODE=off arms each holder's quote mirror publisher too.
	extra := []string{"CRON_MODE=off", "FXDESK_MIRROR_INTERVAL=200ms"}
	prod := newWebTierOn(t, newDeskEnvOn(t, r, redisname.Names{}), extra...)
	staging := newWebTierOn(t, newDeskEnvOn(t, r, stagingNames), extra...)
	prodTok, _ := prod.d.newTrader(760, "USD", "100", "")
	stagingTok, _ := staging.d.newTrader(760, "USD", "100", "")

	// Each follower is subscribed once its rail has shown a tick of its own holder.
	railSees(t, prod.follower, prodTok, func() { prod.d.simQuote("EURUSD", "1.10500", "1.10520") }, "EURUSD", "1.10500", "1.10520")
	railSees(t, staging.follower, stagingTok, func() { staging.d.simQuote("EURUSD", "1.20500", "1.20520") }, "EURUSD", "1.20500", "1.20520")
	prodRail := openRail(t, prod.follower, prodTok, "EURUSD")
	stagingRail := openRail(t, staging.follower, stagingTok, "EURUSD")

	// Staging's tick is published before its own follower shows it, and Redis hands a published
	// message to every subscriber of the channel at once: had production's follower shared the
	// channel, that tick would reach its rail ahead of production's next one.
	staging.d.simQuote("EURUSD", "1.22000", "1.22020")
	stagingRail.until("EURUSD", "1.22000")
	prod.d.simQuote("EURUSD", "1.11000", "1.11020")
	if before := prodRail.until("EURUSD", "1.11000"); len(before) != 0 {
		t.Fatalf("production's follower showed %v before its own holder's 1.11000: another install's ticks", before)
	}
	staging.d.simQuote("EURUSD", "1.23000", "1.23020")
	if before := stagingRail.until("EURUSD", "1.23000"); len(before) != 0 {
		t.Fatalf("staging's follower showed %v before its own holder's 1.23000: another install's ticks", before)
	}

	for _, tc := range []struct {
		name string
		w    *webTier
		key  string
		bid  float64
	}{
		{"production", prod, "engine:lease:forex-trading", 1.11},
		{"staging", staging, "staging:engine:lease:forex-trading", 1.23},
	} {
		e := tc.w.d.e
		// The documented names under the default prefix, the prefixed ones under staging's.
		if got := e.names.EngineLease(lease.Key); got != tc.key {
			t.Fatalf("%s lease key %q, want %q", tc.name, got, tc.key)
		}
		if v, want := e.rdb.Get(context.Background(), tc.key).Val(), "box-a:"+strconv.Itoa(tc.w.d.web.pid()); v != want {
			t.Fatalf("%s: %s = %q, want its own holder %q", tc.name, tc.key, v, want)
		}
		var s struct {
			Holder struct {
				Redis string `json:"redis"`
				Agree bool   `json:"agree"`
			} `json:"holder"`
		}
		if code := tc.w.d.web.getAs(tc.w.d.admin, "/api/admin/fx/desk", &s); code != http.StatusOK || !s.Holder.Agree {
			t.Fatalf("%s desk status = %d %+v, want Redis agreeing with the row", tc.name, code, s.Holder)
		}
		// Once the snapshot carries this install's last price, every later one does: over three
		// publishes, none is the other holder's (both publish term 1 every 200 ms).
		var published int
		var prev time.Time
		eventually(t, 10*time.Second, 20*time.Millisecond, tc.name+"'s snapshot, three publishes", func() bool {
			snap, ok := e.snapshot()
			switch {
			case !ok:
				return false
			case snap.bid("EURUSD") != tc.bid:
				if published > 0 {
					t.Fatalf("%s: %s carried EURUSD %v after its own %v: another install's snapshot", tc.name, e.names.QuoteMirrorSnapshot(), snap.bid("EURUSD"), tc.bid)
				}
				return false
			case !snap.PublishedAt.Equal(prev):
				prev = snap.PublishedAt
				published++
			}
			return published >= 3
		})
	}
	if k := prod.d.e.names.QuoteMirrorSnapshot(); k != "fx:quote-mirror:snapshot" {
		t.Fatalf("production's snapshot key %q", k)
	}
}
