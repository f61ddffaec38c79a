package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/gate"
	"fxdesk/internal/redisname"
	"fxdesk/internal/tick"
)

// Updates is the tick engine's subscription (tick.Engine.Updates): what the stream publishes.
type Updates interface {
	Updates(symbols []string) (<-chan tick.Update, func())
}

// StreamPublisherConfig builds a StreamPublisher; every field but Names and Now is required.
type StreamPublisherConfig struct {
	Redis redis.UniversalClient
	// Names gives the channel (Names.Ticks: fx:ticks under the default prefix, the zero value);
	// the followers of one install must be given the same.
	Names  redisname.Names
	Quotes Updates
	Gate   *gate.Gate
	// Term is the lease term published with every tick (lease.Keeper.Term, an atomic read).
	Term func() int64
	// Digits gives a symbol's quoted decimals, -1 when it has no instrument row.
	Digits func(symbol string) int
	Now    func() time.Time
}

// StreamPublisher publishes the holder's accepted ticks on the install's ticks channel.
type StreamPublisher struct {
	cfg StreamPublisherConfig
	log *slog.Logger
}

// maxBatch bounds how many ticks go to Redis in one pipelined round trip: a burst is sent in
// batches instead of one round trip per tick, so the publisher keeps up with the engine.
const maxBatch = 256

// NewStreamPublisher returns a publisher; it refuses a missing dependency.
func NewStreamPublisher(cfg StreamPublisherConfig, log *slog.Logger) (*StreamPublisher, error) {
	if cfg.Redis == nil || cfg.Quotes == nil || cfg.Gate == nil || cfg.Term == nil || cfg.Digits == nil || log == nil {
		return nil, errors.New("tick stream publisher: Redis, Quotes, Gate, Term, Digits and a logger are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &StreamPublisher{cfg: cfg, log: log}, nil
}

// Run publishes until ctx ends. A Redis failure loses those ticks for display (the next tick
// replaces them) and is logged at most once per failure run; it never stops the process.
func (p *StreamPublisher) Run(ctx context.Context) error {
	ch, cancel := p.cfg.Quotes.Updates(nil)
	defer cancel()
	p.log.InfoContext(ctx, "fx ticks published for follower web processes", slog.String("channel", p.cfg.Names.Ticks()))
	failing := false
	batch := make([]tick.Update, 0, maxBatch)
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				return nil
			}
			batch = append(batch[:0], u)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case u, ok := <-ch:
				if !ok {
					break drain
				}
				batch = append(batch, u)
			default:
				break drain
			}
		}
		// Only the holder publishes: past its trust window the ticks are dropped at the gate,
		// so a zombie holder cannot show followers its prices as the desk's.
		if p.cfg.Gate.Admit(ctx, gate.TickPublish, slog.Int("ticks", len(batch))) != nil {
			continue
		}
		err := p.publish(ctx, batch)
		switch {
		case err != nil && !failing:
			failing = true
			p.log.WarnContext(ctx, "fx ticks not published; followers show older prices until Redis answers", slog.Any("err", err))
		case err == nil && failing:
			failing = false
			p.log.InfoContext(ctx, "fx ticks published again")
		}
	}
}

func (p *StreamPublisher) publish(ctx context.Context, batch []tick.Update) error {
	term, now, channel := p.cfg.Term(), p.cfg.Now(), p.cfg.Names.Ticks()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pipe := p.cfg.Redis.Pipeline()
	for _, u := range batch {
		b, err := encodeTick(u, p.cfg.Digits(u.Symbol), term, now)
		if err != nil {
			return err
		}
		pipe.Publish(ctx, channel, b)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// tickMessage is one accepted tick on the stream: the quote as the snapshot carries it, and what
// a message on its own needs besides — its symbol, the provider's time, when the holder sent it
// (its clock, like receivedAt, so a follower ages the quote by the one rule) and its term.
type tickMessage struct {
	Symbol string `json:"symbol"`
	quoteJSON
	Time   int64 `json:"t"` // provider time, Unix milliseconds
	SentAt stamp `json:"sentAt"`
	Term   int64 `json:"term"` // the publisher's lease term (termFence)
	// Source names the price source the holder published the quote from (docs/prices.md).
	Source string `json:"source,omitempty"`
}

func encodeTick(u tick.Update, digits int, term int64, sentAt time.Time) ([]byte, error) {
	return json.Marshal(tickMessage{Symbol: u.Symbol, quoteJSON: encodeQuote(&u.Quote, digits),
		Time: u.Quote.ProviderTime.UnixMilli(), SentAt: stamp(sentAt), Term: term, Source: u.Quote.Source})
}

// decodeTick turns a message heard at heardAt (the follower's clock, monotonic) into a quote whose
// ReceivedAt is on the follower's clock and as old as the holder says it is. A tick that cannot
// be priced or dated is never stored.
func decodeTick(payload []byte, heardAt time.Time) (symbol string, q tick.Quote, term int64, ok bool) {
	var m tickMessage
	if err := json.Unmarshal(payload, &m); err != nil || m.Symbol == "" || time.Time(m.SentAt).IsZero() || m.Time <= 0 {
		return "", tick.Quote{}, 0, false
	}
	bid, ask, receivedAt, ok := m.quoteJSON.decode()
	if !ok {
		return "", tick.Quote{}, 0, false
	}
	return m.Symbol, tick.Quote{Bid: bid, Ask: ask, ReceivedAt: receivedHere(receivedAt, time.Time(m.SentAt), 0, heardAt),
		ProviderTime: time.UnixMilli(m.Time).UTC(), Source: sourceName(m.Source)}, m.Term, true
}

// sourceName keeps a source name a desk could have configured (a short lower-case name) and
// drops anything else: it only labels the quote.
func sourceName(s string) string {
	if len(s) > 32 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return ""
	}
	return s
}
