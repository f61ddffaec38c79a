// Package feedsim owns the bundled feed simulator: a provider that speaks the Massive/Polygon
// forex quote websocket protocol over a real socket, with random-walk quotes, weekend closure
// from the session calendars, and a loopback control API that lets tests and demos drive prices
// (set a quote, close or open a symbol, silence the stream, burst, inject raw frames).
//
// It is the desk's default provider (started in-process on loopback by fxdesk-web) and the
// provider every tick-engine test talks to. It must never be reachable from anything but
// loopback for control, never be needed by production code paths other than as "a provider at
// a URL", and never import the tick engine: the two meet only on the wire.
//
// # Wire protocol (one websocket at ws://ADDR/forex, text frames, JSON)
//
// Server → client frames are always JSON arrays of events. On connect:
//
//	[{"ev":"status","status":"connected","message":"Connected Successfully"}]
//
// Client → server messages are single objects:
//
//	{"action":"auth","params":"KEY"}          any non-empty key is accepted (only Config.Key when set)
//	  → [{"ev":"status","status":"auth_success","message":"authenticated"}]
//	  → [{"ev":"status","status":"auth_failed","message":"authentication failed"}]  (empty or wrong key)
//	{"action":"subscribe","params":"C.EUR/USD,C.USD/JPY"}   or "C.*" for every pair
//	  → [{"ev":"status","status":"success","message":"subscribed to: C.EUR/USD"}, …]
//	{"action":"unsubscribe","params":"C.EUR/USD"}
//	  → [{"ev":"status","status":"success","message":"unsubscribed to: C.EUR/USD"}]
//
// Subscribing before auth answers [{"ev":"status","status":"error","message":"not authorized"}]
// and changes nothing; the socket stays open. Subscriptions change live on the same socket.
//
// Quotes, batched many to a frame (a = ask, b = bid, t = provider time in Unix milliseconds):
//
//	[{"ev":"C","p":"EUR/USD","x":48,"a":1.08412,"b":1.08410,"t":1764450000123}, …]
//
// Provider session announcements, sent to every client subscribed to the pair when the control
// API changes it, and again right after a subscribe to a pair that is currently closed:
//
//	[{"ev":"status","status":"market_closed","message":"EUR/USD"}]
//	[{"ev":"status","status":"market_open","message":"EUR/USD"}]
//
// A symbol is quoted only while it is "quotable": the provider has not announced it closed, it
// is not silenced, and its session calendar is open (or the simulator runs always-open).
//
// # Control API (same listener, loopback callers only, JSON bodies, desk symbols like EURUSD)
//
//	POST /control/quote      {"symbol":"EURUSD","bid":1.1,"ask":1.1002}  set now; push at once if quotable
//	POST /control/session    {"symbol":"EURUSD","open":false}            announce closed/open ("" or "*" = all)
//	POST /control/silence    {"symbol":"*","seconds":5}                  no quotes for that long (0 lifts)
//	POST /control/burst      {"symbols":["EURUSD"],"ticksPerSecond":50000,"seconds":2}
//	POST /control/raw        {"frame":"[{\"ev\":\"C\"…}]"}              send a text frame verbatim (tests)
//	POST /control/disconnect {}                                          drop every client socket
//	POST /control/spike      {"symbol":"EURUSD","pips":300,"ms":50}      one tick that far off, then the
//	                                                                     price it left after ms (default 50)
//	POST /control/shift      {"symbol":"EURUSD","pips":300}              a persistent move (a real gap)
//	POST /control/offset     {"symbol":"*","pips":50}                    quote that far off the market until 0
//	GET  /control/state
//
// Pips are the instrument's: 10^-(digits-1), so 0.0001 for EURUSD, 0.01 for USDJPY, 0.1 for gold.
// While a spike is out the walk leaves its symbol alone, so a subscriber sees exactly one
// off-market tick. An offset is quoted on top of the walk (and of a set quote) and reported in
// the state; 0 quotes the market again.
//
// # Market seed
//
// With Config.MarketSeed set (cmd/feedsim -seed), prices are not a random walk of this process
// but a deterministic function of (seed, symbol, wall-clock step of WalkInterval), and every
// symbol is quoted at the start of each step. Two simulators with the same seed and interval —
// in one process or two — therefore quote the same market: the desk's primary and backup
// sources agree, and a test can make one of them disagree (offset), spike or go silent. A set
// quote or a shift moves that one simulator's market, which then continues from the new price.
//
// Errors answer {"error":{"code":"EINVALID","message":"…"}} with status 400 (403 off loopback).
// A burst answers 202 with {"ticks":N} and runs in the background; its frames carry up to
// Config.MaxBatch events and are written with back-pressure, so a slow client slows the burst
// instead of losing ticks. Ordinary random-walk frames are dropped for a client whose queue is
// full (counted per client in the state) — a real provider does not wait for a slow reader.
package feedsim
