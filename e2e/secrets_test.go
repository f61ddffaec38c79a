package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// text is the line as JSON, for matching anywhere in it.
func (l logLine) text() string {
	b, _ := json.Marshal(l)
	return string(b)
}

// randomSecret is a credential no log line can hold by chance.
func randomSecret(t *testing.T, what string) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return what + "-" + hex.EncodeToString(b)
}

// Every log line of a desk run with credentials everywhere — a provider key in the feed URL's
// query and another in FXDESK_FEED_KEY, a venue token, a cluster secret, a MySQL and a Redis
// password — is free of all of them, through the paths that log errors: trading through the
// venue and through a follower, the venue refusing the token (401), and the provider gone (the
// reconnect warning whose wrapped error once printed the feed URL whole). The test waits for
// each of those lines, so it fails if a path went quiet instead.
func TestNoSecretInAnyLogLine(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{}
	for _, what := range []string{"feed-url-key", "feed-key", "venue-token", "cluster-secret", "mysql-password", "redis-password"} {
		secrets[what] = randomSecret(t, what)
	}
	e := newDeskEnv(t)
	ctx := context.Background()

	// The install's MySQL user and Redis server get passwords, as a production install's have.
	user := "fxd_" + hex.EncodeToString([]byte(secrets["mysql-password"][len(secrets["mysql-password"])-4:]))
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, secrets["mysql-password"]),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", e.db.Name, user),
	} {
		if _, err := e.sql.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { e.sql.Exec(fmt.Sprintf("DROP USER '%s'@'%%'", user)) })
	dsn, err := mysql.ParseDSN(e.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	dsn.User, dsn.Passwd = user, secrets["mysql-password"]
	e.mysqlDSN = dsn.FormatDSN()
	if err := e.rdb.ConfigSet(ctx, "requirepass", secrets["redis-password"]).Err(); err != nil {
		t.Fatal(err)
	}
	// The harness's own client reconnects with the password from now on.
	e.rdb = redis.NewClient(&redis.Options{Addr: e.redis.Addr, Password: secrets["redis-password"]})
	t.Cleanup(func() { e.rdb.Close() })

	feed := startFeedSim(t, "-key", secrets["feed-key"])
	venue := startVenueSimWithToken(t, feed, "20ms", secrets["venue-token"])
	env := []string{
		"FXDESK_FEED=" + feed.url + "?apiKey=" + secrets["feed-url-key"],
		"FXDESK_FEED_KEY=" + secrets["feed-key"],
		"FXDESK_REDIS_URL=redis://:" + secrets["redis-password"] + "@" + e.redis.Addr + "/0",
		"FXDESK_FORWARD=on",
		"FXDESK_CLUSTER_SECRET=" + secrets["cluster-secret"],
		"FXDESK_VENUE_TOKEN=" + secrets["venue-token"],
	}
	d := startABookDesk(e, feed, venue, "holder", env...)
	holder := d.web
	follower := e.start("follower", "fxdesk-web", d.env...)
	follower.waitLog(10*time.Second, msgHas("role: follower"))

	// Trading: an A-book order goes to the venue; one placed on the follower is forwarded to the
	// holder under the cluster secret.
	tok, acct := d.externalTrader(2300, "10000.00")
	d.setQuote(tok, "EURUSD", "1.10000", "1.10020")
	d.openMarket(tok, acct, "BUY", "0.10", "")
	must(t, follower, tok, "POST", "/api/fx/orders", marketOrder(acct, "SELL", "0.10", "forwarded-1"), http.StatusCreated, nil)

	// The venue comes back accepting another token only: the holder's calls are refused (401).
	venue.kill()
	venue.token = randomSecret(t, "another-venue-token")
	venue.restart()
	holder.waitLog(30*time.Second, func(l logLine) bool { return strings.Contains(l.text(), "venue refused the request (401)") })

	// The provider goes away: the holder warns that it reconnects, with the failed dial's error.
	feed.kill()
	holder.waitLog(30*time.Second, func(l logLine) bool {
		return l.msg() == "provider connection ended; reconnecting" && strings.Contains(l.text(), "dial provider")
	})

	outputs := map[string][]string{}
	for _, p := range []*proc{holder, follower} {
		outputs[p.name] = append(p.rawLines(), strings.Split(p.stdout.String(), "\n")...)
	}
	venue.mu.Lock()
	outputs["venuesim"] = append([]string(nil), venue.log...) // it held the desk's token until the restart
	venue.mu.Unlock()
	for name, lines := range outputs {
		for _, line := range lines {
			for what, s := range secrets {
				if strings.Contains(line, s) {
					t.Errorf("%s logged the %s: %s", name, what, line)
				}
			}
		}
	}
}
