package config

import (
	"fmt"
	"time"
)

// CandlesConfig is the price history (docs/candles.md): how often the holder writes its candles
// and how long each granularity's are kept.
type CandlesConfig struct {
	// FlushEvery is FXDESK_CANDLES_FLUSH (default 2s, 100ms..1m): the most candle history a
	// crash or a takeover can lose, and how stale the candle in progress reads.
	FlushEvery time.Duration
	// RetentionM1 .. RetentionD1 are FXDESK_CANDLES_RETENTION_M1 (default 2160h, 90 days),
	// _M5, _H1 and _D1 (default 0: kept for ever): candles that opened longer ago are pruned by
	// the holder. 0 or at least 24h.
	RetentionM1, RetentionM5, RetentionH1, RetentionD1 time.Duration
}

func loadCandles(duration func(key, def string) time.Duration) (CandlesConfig, []error) {
	c := CandlesConfig{
		FlushEvery:  duration("FXDESK_CANDLES_FLUSH", "2s"),
		RetentionM1: duration("FXDESK_CANDLES_RETENTION_M1", "2160h"),
		RetentionM5: duration("FXDESK_CANDLES_RETENTION_M5", "0s"),
		RetentionH1: duration("FXDESK_CANDLES_RETENTION_H1", "0s"),
		RetentionD1: duration("FXDESK_CANDLES_RETENTION_D1", "0s"),
	}
	var errs []error
	if c.FlushEvery < 100*time.Millisecond || c.FlushEvery > time.Minute {
		errs = append(errs, fmt.Errorf("FXDESK_CANDLES_FLUSH=%s must be from 100ms to 1m (a takeover loses up to one period of candles)", c.FlushEvery))
	}
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"M1", c.RetentionM1}, {"M5", c.RetentionM5}, {"H1", c.RetentionH1}, {"D1", c.RetentionD1}} {
		if r.d != 0 && r.d < 24*time.Hour {
			errs = append(errs, fmt.Errorf("FXDESK_CANDLES_RETENTION_%s=%s must be 0 (keep every candle) or at least 24h (2160h is 90 days)", r.name, r.d))
		}
	}
	return c, errs
}
