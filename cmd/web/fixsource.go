package main

import (
	"fmt"
	"log/slog"

	"fxdesk/internal/config"
	"fxdesk/internal/tick"
)

// fixSource builds a fix:// price source. FIX market data (internal/fixmd) is not on this
// branch yet: the desk refuses to start rather than run without a source it was told to use.
func fixSource(src config.PriceSource, _ *slog.Logger) (tick.Source, error) {
	return nil, fmt.Errorf("price source %s: fix:// sources need FIX market data (internal/fixmd), which this build does not have yet; use sim or ws:// for now", src.Name)
}
