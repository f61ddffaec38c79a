// Package fixvenue owns the bundled FIX venue: a FIX 4.4 acceptor (QuickFIX/Go) that stands in
// for a liquidity provider's taker session. It fills MARKET NewOrderSingle at a feed's prices
// after a latency, nets every fill into one position per symbol (FIX venues net), answers
// OrderStatusRequest by ClOrdID, OrderMassStatusRequest and RequestForPositions, and lets tests
// and demos inject the faults a real session has through a loopback control API: the session
// dropped, an order's report held, an order rejected, a position closed venue-side, a report
// lost after execution, a query never answered.
//
// It is the desk's venue when FXDESK_VENUE=fix points the desk's session file at it, and the
// venue every FIX execution test talks to. Its message store is in memory: a restarted venue is
// a new session (the desk's stored sequence numbers then no longer match; see docs/fix.md).
//
// # Messages
//
//	NewOrderSingle (D), OrdType=1 MARKET  → ExecutionReport (8) ExecType=F OrdStatus=2 at the
//	    venue's price (a buy at the ask, a sell at the bid), or ExecType=8 OrdStatus=8 with
//	    OrdRejReason/Text. A ClOrdID seen before executes nothing: a library resend after a
//	    dropped session (PossDupFlag=Y) is answered with the order's status (ExecType=I); the
//	    same ClOrdID sent again without PossDupFlag is refused, ExecType=8 OrdStatus=8
//	    OrdRejReason=6 (duplicate order), never answered with the old order's status.
//	NewOrderSingle (D), OrdType=2 LIMIT with Price (44) → executed as a MARKET when the venue's
//	    price is at the limit or better, otherwise cancelled whole (ExecType=4 OrdStatus=4,
//	    Text "BOUNDS_VIOLATION: …"): the venue rests nothing, a LIMIT is immediate (limit.go).
//	OrderStatusRequest (H) by ClOrdID     → ExecutionReport ExecType=I, or OrdStatus=8
//	    OrdRejReason=5 (unknown order) for a ClOrdID the venue never saw.
//	OrderMassStatusRequest (AF)           → one ExecType=I report per order (MassStatusReqID,
//	    TotNumReports, LastRptRequested on the last).
//	RequestForPositions (AN)              → RequestForPositionsAck (AO) with TotalNumPosReports,
//	    then that many PositionReports (AP), each with TotalNumPosReports: per symbol with a net
//	    position, NoPositions entries as Config.PositionReports says (TQ; TQ and SOD; or a
//	    report per entry), SettlPrice = the net position's average price. With
//	    Config.RequireParties a request without Parties gets a Reject (35=3, RefTagID 453).
//
// # Market data
//
// A second session on the same port, Config.MDVenueCompID/MDDeskCompID (FXVENUE-MD, FXDESK-MD),
// resets on every logon and serves top of book from Config.Prices, read every
// Config.MarketDataInterval while anything is subscribed (md.go):
//
//	MarketDataRequest (V) 263=1        → MarketDataSnapshotFullRefresh (W) per symbol, then
//	    MarketDataIncrementalRefresh (X) with the sides that changed (MDUpdateAction 0/1/2);
//	    265=0 asks for a W per change instead. 263=0: the snapshots alone. 263=2 ends MDReqID.
//	a symbol not listed, a repeated MDReqID, another 263/264/265/269 → MarketDataRequestReject
//	    (Y), MDReqRejReason 0, 1, 4/5/6/8; a V on the trade session → Y, MDReqRejReason 3.
//
// Market data is never stored nor resent (a ResendRequest is gap-filled).
//
// OrdRejReason is FIX 4.4's: 1 for a symbol the venue does not list (Config.Instruments), 2 for a
// listed one with no price now, 11 for an OrdType other than MARKET or LIMIT; every report echoes the
// OrdType its order carried.
//
// With Config.Password set (cmd/fixvenue -username/-password) the venue requires Username (553)
// and Password (554) on the desk's Logon and refuses any other with a Logout whose Text says why.
//
// A venue-side close is an unsolicited ExecutionReport ExecType=F: the venue's own order against
// the net position, its ClOrdID as Config.OwnClOrdIDs says ("VENUE-n", a number, or none).
// Orders are filled whole; a FaultPartial fills only part of an IOC order and cancels a FOK one.
//
// Messages with repeating groups (PositionReport's NoPositions) are never resent: a
// ResendRequest covering one is answered with a gap fill, because QuickFIX/Go v0.9.10 writes a
// resent message with a repeating group with two checksums. A position request is a query the
// desk repeats, never a record.
//
// # Control API (http://CONTROL-ADDR, loopback callers only, JSON)
//
//	POST /control/fault   {"kind":"reject|hold|lose|ignore|partial|refuse|session-reject|business-reject|split",
//	    "count":1,"reason":2,"text":"…","units":"12345","executions":3}
//	    the next count orders are rejected (OrdRejReason reason, Text text), executed with their
//	    report held until /control/release, or executed with their report never sent (only an
//	    OrderStatusRequest or a mass status finds them), or executed in executions (default 2)
//	    executions, each reported (ExecType=F, OrdStatus=1 until the last, LastQty/LastPx the
//	    execution's, CumQty/AvgPx the order's so far); "ignore" counts queries instead: the
//	    next count OrderStatusRequests, OrderMassStatusRequests or RequestForPositions are
//	    received and never answered (a query gap-filled in a resend never reaches the venue; the
//	    desk asks again); "partial" fills only units of the next orders (IOC) or cancels them
//	    (FOK); "refuse" refuses the next position requests (ack PosReqStatus=2, PosReqResult
//	    reason, default 3); "session-reject" and "business-reject" refuse the next count orders
//	    as messages: a Reject (35=3, RefSeqNum the order's) or a BusinessMessageReject (35=j,
//	    BusinessRejectRefID the ClOrdID), reason the SessionRejectReason/BusinessRejectReason;
//	    nothing is booked, so a status request then answers "unknown order".
//	POST /control/release {"clOrdId":"…"}  sends held reports ("" or no body: all of them)
//	POST /control/drop    {"seconds":2} cuts the TCP connection of the session (the initiator
//	    reconnects) and, for seconds (absent: none), every reconnect as soon as it is accepted
//	    (an outage)
//	POST /control/close   {"symbol":"EURUSD","units":"5000","clOrdId":"…"} the venue closes
//	    units (absent: all) of its net position itself, its order named clOrdId when given
//	GET  /control/state   orders (each with the MsgSeqNums of the NewOrderSingles that carried
//	    it: a library resend keeps its number), net positions, held reports, whether a session
//	    is logged on, the end of an outage (downUntil), connections the desk opened since the
//	    venue started, queries received by message and those ignored (queries)
//
// It must never be reachable for control from anything but loopback, and never import the
// desk's FIX adapter: the two meet only on the wire.
package fixvenue
