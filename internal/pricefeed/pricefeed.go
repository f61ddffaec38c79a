// Package pricefeed shows the holder's prices on every web process (docs/architecture.md, «Prices
// on Redis: the quote mirror and the tick stream» and «The web tier»). The lease holder publishes
// every tick its engine accepts to one Redis pub/sub channel (fx:ticks under the default
// FXDESK_REDIS_PREFIX: redisname.Names.Ticks), through the gate, one writer; every follower web
// process subscribes and serves /quotes, /symbols states and the markets rail from what it hears,
// each quote aged on the holder's clock.
//
// It is not the quote mirror (internal/mirror): that is a snapshot every 5 s for the cron
// process's conversions. This is every tick, for display.
//
// What it must never do: price a fill. A follower's quotes are for display; the gate refuses
// desk-priced work on a follower whatever prices it shows, and such requests are forwarded to
// the holder (internal/forward).
package pricefeed

import (
	"encoding/json"
	"strconv"
	"time"

	"fxdesk/internal/tick"
)

// message is one accepted tick as published: decimal strings and RFC 3339 times an operator can
// read. ReceivedAt and SentAt are both on the holder's clock, so a follower ages the quote by
// their difference plus its own monotonic time since it heard the message: skew cancels.
type message struct {
	Symbol     string    `json:"symbol"`
	Bid        string    `json:"bid"`
	Ask        string    `json:"ask"`
	Time       int64     `json:"t"` // provider time, Unix milliseconds
	ReceivedAt time.Time `json:"receivedAt"`
	SentAt     time.Time `json:"sentAt"`
	Term       int64     `json:"term"` // the publisher's lease term; a follower ignores older ones
}

func encode(u tick.Update, digits int, term int64, sentAt time.Time) ([]byte, error) {
	prec := digits
	if prec < 0 {
		prec = -1 // no instrument row: the shortest exact form
	}
	return json.Marshal(message{
		Symbol: u.Symbol, Bid: strconv.FormatFloat(u.Quote.Bid, 'f', prec, 64), Ask: strconv.FormatFloat(u.Quote.Ask, 'f', prec, 64),
		Time: u.Quote.ProviderTime.UnixMilli(), ReceivedAt: u.Quote.ReceivedAt.UTC(), SentAt: sentAt.UTC(), Term: term,
	})
}

// decode turns a message heard at heardAt (the follower's clock, monotonic) into a quote whose
// ReceivedAt is on the follower's clock and as old as the holder says it is.
func decode(payload []byte, heardAt time.Time) (symbol string, q tick.Quote, term int64, ok bool) {
	var m message
	if err := json.Unmarshal(payload, &m); err != nil || m.Symbol == "" || m.ReceivedAt.IsZero() || m.SentAt.IsZero() || m.Time <= 0 {
		return "", tick.Quote{}, 0, false // a tick that cannot be dated is never stored
	}
	bid, err1 := strconv.ParseFloat(m.Bid, 64)
	ask, err2 := strconv.ParseFloat(m.Ask, 64)
	if err1 != nil || err2 != nil || bid <= 0 || ask <= 0 || bid > ask {
		return "", tick.Quote{}, 0, false
	}
	age := max(m.SentAt.Sub(m.ReceivedAt), 0)
	return m.Symbol, tick.Quote{Bid: bid, Ask: ask, ReceivedAt: heardAt.Add(-age), ProviderTime: time.UnixMilli(m.Time).UTC()}, m.Term, true
}
