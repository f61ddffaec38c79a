// Package risk is the desk's risk engine (docs/architecture.md, «The risk engine»): on the lease
// holder only, it watches every open position, resting order and margined account, and decides — on
// each tick — which stops, take-profits and pending orders trigger and which accounts are
// margin-called or stopped out.
//
// It owns an in-memory view of the desk (positions, resting LIMIT/STOP orders, accounts and
// instruments), loaded once through Loader before the first tick is evaluated and kept in step with
// the database by Engine.Apply, which the trading service calls after each commit. Floats rank and
// compare here; the executor recomputes every amount it writes exactly (docs/architecture.md,
// «Money and the ledger»).
//
// It must never write to the database itself (every decision goes through the Executor, one
// fenced transaction per close or fill); never act on a process that is not the confirmed lease
// holder (every unit of work passes Gate.Admit right before it starts — a tick when it is
// evaluated, a close or fill when a worker picks it, an alert when it is sent — and is dropped
// with a warning naming it); never queue dropped work for replay (the position or order simply
// stays under watch, and the lease_restored sweep re-derives what is due from the state and
// prices of that moment); and never block the tick path on I/O or on a worker. A tick the
// engine never received — the tick engine drops updates for a subscriber a whole buffer behind —
// is made good the same way: Config.Dropped reports the loss and the updates_dropped sweep
// evaluates everything at current prices.
//
// Structure:
//
//	tick.Update ──▶ onTick(symbol) ──▶ book[symbol]: 8 trigger heaps
//	                   │                 buy SL (bid ≤ SL)  buy TP (bid ≥ TP)
//	                   │                 sell SL (ask ≥ SL) sell TP (ask ≤ TP)
//	                   │                 buy LIMIT (ask ≤ p) buy STOP (ask ≥ p)
//	                   │                 sell LIMIT (bid ≥ p) sell STOP (bid ≤ p)
//	                   │               + 2 trail books (trail.go): buy trails on the bid, sell on the ask
//	                   │               take only what fired ──▶ mark closing/filling ──▶ queue
//	                   └──▶ book[symbol]: 2 margin-band heaps (lo, hi) + stale list
//	                          accounts whose band the quote leaves, or changed since their last
//	                          mark, each marked from per-symbol aggregates
//	                          (Σ buy lots, Σ buy lots×open, Σ sell lots, Σ sell lots×open)
//	                          ├─ below margin call: one alert per crossing, and one record of
//	                          │  its end once back above (or no position) ──▶ alert queue
//	                          ├─ at/below stop-out: largest loser that can be closed now ──▶
//	                          │  mark closing ──▶ queue, recompute, repeat until above the
//	                          │  level or nothing closable is open
//	                          └─ a new band around the prices just read
//	queue ──▶ Workers goroutines (all started by Run before the load) ──gate──▶ Executor
//
// Storage. Positions and resting orders live in slices of plain structs addressed by int32
// indexes (freed slots are reused), with one map from database id to index per kind; a heap
// entry holds its key and its owner's index, and each kind keeps a table of the owners' heap
// slots. None of it holds a pointer, so the garbage collector does not scan the hundred thousand
// positions of a large desk, and once its scratch slices have grown a tick or a close allocates
// nothing.
//
// Per-tick cost. A heap yields only the triggers the tick reaches: popped one by one (O(k log n)
// for k fired) when a few fire, or split off in one pass over the heap when a gap reaches a large
// share of it — then in the heap's level order rather than strictly nearest first, since they all
// execute at the gapped quote. An account is re-marked only when something may have changed for
// it (band.go): after each mark the engine computes a relative move δ such that, while the bid
// and ask of every symbol the account depends on (its own symbols and their USD-hub legs) stay
// within δ of the quotes that mark read, all of them moving at once, no mark could raise an
// alert, re-arm one or stop the account out. Those edges sit in the lo/hi heaps of each symbol,
// so a tick visits only the accounts whose edge it reaches. Every change that moves an account's
// marks without a tick (a position opened, reduced, closed or handed off, a balance, the
// account's or an instrument's terms, a failed alert to re-arm) lists it as stale on each of its
// symbols, and the next tick of any of them marks it. An account that cannot be priced, or that
// would act again at the very prices it was marked at, is marked on every tick of its symbols, as
// every exposed account was before bands. Neither path grows with the number of positions that
// did not trigger or accounts that cannot cross. A quote the tick engine dropped because the
// engine fell behind is made good by the updates_dropped sweep, as for stops.
//
// Marks after a hand-off. A position handed to a worker is marked closing: it leaves the heaps
// (it cannot be queued twice) and the aggregates, and its estimated profit at the triggering
// quote moves to the account's pending sum. The stop-out loop therefore recomputes the level the
// account will have once that close commits, and never picks the same position twice. The
// executor's Apply (PositionClosed with the exact balance) replaces the estimate; "already
// closed" (a trader's close won the row lock) just ends the watch; a drop at the gate or any
// other error puts the position back under watch.
//
// Stop-out. At or below an account's stop-out level the engine closes the largest-losing
// position that can be closed now, recomputes the level with that close handed off, and goes on
// to the next, until the level is above the stop-out level or nothing closable is open. "Can be
// closed now" is the executor's own rule read from the engine's view: the instrument is not
// HALTED (Instrument.Halted) and the symbol is QUOTING (tick.Prices.SymbolState: not MARKET_CLOSED,
// not stale). A position that cannot be closed is passed over and stays watched; the account,
// still below its level, is marked on every tick of its symbols (its band is "every tick"), so
// the position is closed at the first tick after its market reopens. When the executor refuses
// a close for market state anyway (ErrMarketUnavailable: its view of the session or the
// instrument changed first), the answer puts the position back under watch, passed over until its
// symbol ticks again, and the account is re-marked at once, so the next loser is handed off
// without waiting for a band crossing. Each skip is logged once per position and reason per
// episode (an episode ends when the level is back above the stop-out level), never at error.
// Each stop-out close is handed to Executor.StopOut with its decision (StopOut): the level,
// equity and used margin of the round that picked it and the terms the account was marked with,
// which the executor records beside the close — one re-mark and one allocation per stop-out
// close, nothing on a tick that stops nobody out.
//
// Workers. Config.Workers is how many executor calls can make progress at once, and the engine
// runs that many. On the holder the executor is the trading service's group commit: a close
// waits in its batch without holding a database connection, and one batch carries up to
// book.MaxBatch closes, so cmd/web gives the engine twice that many workers (book.MaxWaiting) —
// enough closes waiting to fill the next batch while one commits. With fewer, batches stay small
// and the disk's commit rate is the desk's again (with exactly book.MaxBatch, a burst alternates
// full batches with batches of one); with more, the extra goroutines only queue behind a full
// batch. An
// executor that held a connection per call would be sized by its pool instead: beyond it, blocked
// callers are the staircase of the burst post, whose cost is paid in the middle of the burst. All
// workers are started by Run before the view loads, so a burst creates none. The queue in front
// of them never blocks the tick path and needs no bound of its own: an item is queued at most
// once, so it never holds more than the engine's positions and orders (plus one alert per
// account, served by one goroutine of its own so a slow alert never delays a close). The tick
// path hands decided jobs over 16 at a time and wakes only workers that sleep; a worker hands in
// its last answer and takes its next job under one lock, and the answers are applied by whoever
// next holds the engine's lock.
//
// Own time, per close, runs from the moment Run received the tick (or the sweep began) to the
// moment a worker calls Executor.Close; Config.Observe receives it. In a burst larger than the
// worker count it includes the wait for a free connection, which is the desk's real latency.
package risk
