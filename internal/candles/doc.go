// Package candles owns the desk's price history (docs/candles.md): bid and ask candles (open,
// high, low, close and a tick count) at M1, M5, H1 and D1, built on the lease holder from the
// quotes the tick engine PUBLISHED (tick.Engine.Updates), kept in memory and written to
// fx_candle in batches; the retention prune; and the reads any web process serves
// (GET /api/fx/candles).
//
// What it must never do:
//   - write per tick: the Writer upserts every candle touched since its last flush in one
//     multi-row statement per FlushEvery (and once more at shutdown);
//   - invent prices: a candle exists only where a tick was published, so a closed market, a
//     halted symbol or a silent feed leaves a gap, never a flat candle;
//   - read held or dropped ticks: it subscribes to the engine's published updates only.
//
// Time. A tick counts in the candles of its ReceivedAt, the engine's clock when the desk took the
// price: it is the time the risk engine acted on it, it is ordered per symbol as the engine
// delivers, and it does not depend on a provider's clock (which differs between sources and
// jumps at a failover). D1 runs from one 17:00 New York rollover to the next (fx.LastRollover),
// the desk's trading day (docs/eod.md); its openTime is the rollover that opens it.
//
// Costs. The builder's Add takes no allocation except when a candle opens (once per symbol and
// granularity period); memory is one open candle per symbol and granularity plus the completed
// candles not yet flushed.
package candles
