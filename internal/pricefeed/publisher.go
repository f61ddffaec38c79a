package pricefeed

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"fxdesk/internal/gate"
	"fxdesk/internal/redisname"
	"fxdesk/internal/tick"
)

// Updates is the tick engine's subscription (tick.Engine.Updates).
type Updates interface {
	Updates(symbols []string) (<-chan tick.Update, func())
}

// PublisherConfig builds a Publisher; every field but Names and Now is required.
type PublisherConfig struct {
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

// Publisher publishes the holder's accepted ticks on the install's ticks channel.
type Publisher struct {
	cfg PublisherConfig
	log *slog.Logger
}

// maxBatch bounds how many ticks go to Redis in one pipelined round trip: a burst is sent in
// batches instead of one round trip per tick, so the publisher keeps up with the engine.
const maxBatch = 256

// NewPublisher returns a publisher; it refuses a missing dependency.
func NewPublisher(cfg PublisherConfig, log *slog.Logger) (*Publisher, error) {
	if cfg.Redis == nil || cfg.Quotes == nil || cfg.Gate == nil || cfg.Term == nil || cfg.Digits == nil || log == nil {
		return nil, errors.New("pricefeed: the publisher needs Redis, Quotes, Gate, Term, Digits and a logger")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Publisher{cfg: cfg, log: log}, nil
}

// Run publishes until ctx ends. A Redis failure loses those ticks for display (the next tick
// replaces them) and is logged at most once per failure run; it never stops the process.
func (p *Publisher) Run(ctx context.Context) error {
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

func (p *Publisher) publish(ctx context.Context, batch []tick.Update) error {
	term, now, channel := p.cfg.Term(), p.cfg.Now(), p.cfg.Names.Ticks()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	pipe := p.cfg.Redis.Pipeline()
	for _, u := range batch {
		b, err := encode(u, p.cfg.Digits(u.Symbol), term, now)
		if err != nil {
			return err
		}
		pipe.Publish(ctx, channel, b)
	}
	_, err := pipe.Exec(ctx)
	return err
}
