// Package pricesource owns the dealer's side of the desk's several price sources
// (docs/operations.md, «Price sources»): the pins and halts a dealer sets per symbol (table
// fx_price_source_pin, each change audited in its own transaction), applying them to the lease
// holder's tick engine — at once, and again from the table whenever a holder starts — and
// watching the engine's switches of source: each one logged with symbol, from, to and reason,
// counted, and the alert price-source-failover raised while any symbol quotes from other than
// its first source, resolved when all are back.
//
// It never filters, selects or publishes a price: the tick engine does (internal/tick, Source,
// Selection, Switch). It never writes a pin without its audit row, and never changes the engine
// for a pin the table does not hold.
package pricesource
