// Package venuesim owns the bundled venue simulator: an execution venue that speaks the subset
// of the OANDA v20 REST API the desk uses (internal/venue) over a real HTTP socket, fills at a
// feed's prices after a latency, keeps a margin account, and lets tests and demos inject the
// faults a real venue has (an outage, 5xx, an answer lost after execution, a held answer, a
// cancel), close trades itself and open trades nobody at the desk sent.
//
// It is the desk's venue when FXDESK_VENUE=sim and the venue every execution test talks to. It
// must never be reachable for control from anything but loopback, never be needed by production
// code paths other than as "a venue at a URL", and never use the client: it imports package
// venue only for its constants (order and trade states, cancel reasons) and its symbol spelling
// (InstrumentName, DeskSymbol), never Client, so the two meet only on the wire.
//
// # Trading API (http://ADDR, Authorization: Bearer TOKEN, /v3/accounts/{id}/…)
//
//	POST /orders                  {"order":{"type":"MARKET","instrument":"EUR_USD","units":"100000",
//	                               "timeInForce":"FOK","positionFill":"DEFAULT",
//	                               "clientExtensions":{"id":"C1","tag":"fxdesk"},"tradeClientExtensions":{…}}}
//	  → 201 {orderCreateTransaction, orderFillTransaction | orderCancelTransaction, lastTransactionID}
//	PUT  /trades/{id|@clientId}/close  {"units":"ALL"} or {"units":"5000"}; no body (or no units): ALL
//	  → 200 {orderCreateTransaction, orderFillTransaction (tradesClosed | tradeReduced) | orderCancelTransaction, …}
//	GET  /openTrades              → {trades (newest first), lastTransactionID}
//	GET  /trades/{id|@clientId}   → {trade, lastTransactionID}; 404 TRADE_DOESNT_EXIST
//	GET  /orders/@{clientId}      → {order, lastTransactionID}; 404 ORDER_DOESNT_EXIST
//	GET  /summary                 → {account, lastTransactionID}
//	GET  /transactions/sinceid?id=N → {the next transactions after N (at most 1000, oldest first), lastTransactionID}
//	GET  /transactions/{id}       → {transaction, lastTransactionID}
//
// Numbers and prices are decimal strings, ids strings of digits, times RFC 3339 in UTC. An
// order's id is its MARKET_ORDER transaction's; a trade's id is the fill's that opened it. As at
// OANDA, an order does not carry its cancel reason: it names its cancellingTransactionID, and
// GET /transactions/{id} gives that transaction's reason. Orders are kept by client id only.
//
// Errors answer {"errorCode":"…","errorMessage":"…"}: 400 for a malformed request (nothing is
// executed) and 400 INSTRUMENT_UNKNOWN for an order on an instrument the account does not offer
// (Config.Instruments, default DefaultInstruments: nothing is created, no transaction id is
// used, the client id stays free), 401 for a missing or wrong token, 403 for another account, 404 as above, 503 for
// an injected 5xx. A clientExtensions.id the venue has seen before (executed, cancelled or still
// executing) answers 400 CLIENT_ORDER_ID_ALREADY_EXISTS and executes nothing: the defence
// against a re-send. A 5xx'd order was never seen, so its client id stays free.
//
// # Execution and the account
//
// The account is a hedging account: every order opens its own trade and a sell never reduces
// a buy. Buys fill at the ask and sells at the bid; a close of a long fills at the bid and of a
// short at the ask. An offered symbol the price source does not quote (unpriced, closed,
// silenced) cancels the order or the close with MARKET_HALTED. Realized P&L is booked to the balance in the account
// currency, converted from the quote currency with mid prices, directly or through USD (a
// currency the venue cannot price at all counts one to one: the venue needs no exactness).
//
//	NAV                   = balance + unrealized P&L (longs at the bid, shorts at the ask)
//	marginUsed            = Σ |units| × mid ÷ leverage, per symbol, in the account currency
//	marginAvailable       = NAV − marginUsed
//	marginCloseoutPercent = (marginUsed ÷ 2) ÷ NAV   (OANDA's closeout margin is about half the
//	                        initial margin; 1 or more means a closeout is due, and the venue
//	                        simulator does not close out on its own — POST /control/close-trade does)
//
// An order whose margin would take marginAvailable below zero is cancelled INSUFFICIENT_MARGIN.
// Every creation, fill and cancel is a transaction with the next integer id; the first is the
// opening TRANSFER_FUNDS (fundingReason CLIENT_FUNDING). Orders and closes execute after the latency, even when the client hangs
// up meanwhile, as at a real venue.
//
// # Control API (its own listener, loopback callers only, JSON bodies)
//
// The control API listens apart from the trading API, so an outage leaves it up.
//
//	POST /control/fault  {"kind":"outage","seconds":5}
//	                     the trading listener closes, and every trading connection with it; new
//	                     connections are refused; after seconds it listens again on the same address
//	POST /control/fault  {"kind":"5xx","count":2}
//	                     the next count trading requests (any endpoint) answer 503, executing nothing
//	POST /control/fault  {"kind":"timeout","count":1,"seconds":30}
//	                     the next count orders or closes EXECUTE; their answer is held for seconds,
//	                     then the connection is closed without one
//	POST /control/fault  {"kind":"hold","count":3}
//	                     the next count orders execute; their answers wait for /control/release
//	POST /control/fault  {"kind":"cancel","count":1,"reason":"INSUFFICIENT_MARGIN"}
//	                     the next count orders answer orderCancelTransaction with that reason
//	POST /control/fault  {"kind":"partial","count":1,"percent":60}
//	                     the next count IOC orders fill 60 % of their units (rounded down to whole
//	                     1,000s); the trade opens with those. A FOK order, or a part that rounds to
//	                     nothing, is cancelled INSUFFICIENT_LIQUIDITY: FOK never fills a part
//	POST /control/release {}                             answer every held order now → {"released":N}
//	POST /control/close-trade {"tradeId":"7","units":"5000"}  the venue closes (units, or all of) a
//	                     trade at the current price, reason MARKET_ORDER_MARGIN_CLOSEOUT
//	POST /control/untagged {"symbol":"EURUSD","units":"-10000"}  open a trade with no client
//	                     extensions → {"tradeId":"9"}
//	POST /control/latency {"ms":0}                       execution latency from now on
//	POST /control/gap {"ids":1500}  leave 1500 transaction ids unused (a rolled-back batch, an id
//	                     stride): sinceid pages walk past it by count
//	GET  /control/state  trades (open and closed, client id and tag, units, prices), order requests
//	                     per client id, requests per endpoint, connections accepted, answers held,
//	                     orders executed, last transaction id, pending faults, the account's money
//
// count defaults to 1; a fault replaces a pending fault of the same kind. A request draws its
// faults when it arrives: a 5xx ends it there; otherwise an order may draw a cancel and,
// independently, a timeout or else a hold (timeouts are drawn first), and a close a timeout,
// unless the venue refuses it (404, 400: it executes nothing). Errors answer
// {"error":{"code":"EINVALID","message":"…"}} with status 400 (404 ENOTFOUND for a trade that is
// not open, 403 off loopback).
package venuesim
