package main

import (
	"fmt"
	"log/slog"

	"fxdesk/internal/config"
	"fxdesk/internal/fixmd"
	"fxdesk/internal/tick"
)

// fixSource builds a fix:// price source: FIX 4.4 market data from an LP's session
// (docs/fix.md), its URL already checked by the configuration.
func fixSource(src config.PriceSource, log *slog.Logger) (tick.Source, error) {
	cfg, err := fixmd.ParseURL(src.Name, src.URL)
	if err != nil {
		return nil, err
	}
	s, err := fixmd.New(cfg, log.With(slog.String("part", "fix market data")))
	if err != nil {
		return nil, fmt.Errorf("price source %s: %w", src.Name, err)
	}
	return s, nil
}
