// Package fixmd owns the desk's FIX 4.4 market-data source: a tick.Source over a QuickFIX/Go
// initiator session of its own (a SenderCompID/TargetCompID pair apart from any trade session,
// as liquidity providers give it). It logs on, subscribes the engine's wanted symbols with one
// MarketDataRequest (35=V, SubscriptionRequestType 1, bid and offer, MarketDepth 1, MDUpdateType
// 1) per symbol, follows WantedChanged with subscribes and unsubscribes (263=2), and offers the
// top of book of every MarketDataSnapshotFullRefresh (35=W) and MarketDataIncrementalRefresh
// (35=X) to the engine. A MarketDataRequestReject (35=Y) is logged and kept (Refused); that
// symbol is asked for again after the next reconnect.
//
// The session's store is in memory and it resets on every logon: market data is never
// replayed, a reconnect subscribes afresh and the venue answers with new snapshots. Run
// reconnects with a back-off (Config.BackoffMin doubling to BackoffMax, reset once a session
// stayed logged on for BackoffMax) by starting a new initiator, because the library's own
// reconnect waits a fixed interval.
//
// The library's callbacks never wait on the engine: they update the top of book under a short
// lock and leave the newest quote per symbol for Run, which offers it (a slow engine sees the
// latest price, not a backlog). Provider time is the entry's MDEntryDate+MDEntryTime, else the
// message's SendingTime.
//
// It must never import the bundled venue (internal/sim/fixvenue): they meet only on the wire.
package fixmd
