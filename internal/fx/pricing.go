package fx

// The texts the desk fixes (docs/architecture.md, «Who may quote») for a process that cannot quote:
// the first answers an open or a close, the second a withdrawal from an account with open
// positions.
const (
	MsgPricingUnavailable   = "Pricing is temporarily unavailable for this instrument — please retry shortly"
	MsgPositionsUnpriceable = "Pricing is currently unavailable for one of your open positions"
)

// MsgRiskViewLoading answers an order the lease holder refuses while its risk engine is still
// loading the book it must watch — after a boot or a standby's takeover (EUNAVAILABLE, 503): nothing
// was written, and the same request sent again shortly (same requestNonce) is served.
const MsgRiskViewLoading = "The desk is starting its risk engine and takes no new orders until it watches every position — nothing was written; please retry shortly"

// MsgOutcomeUnknown answers a request whose outcome the desk cannot know (EUNKNOWN): a forward to
// the lease holder whose connection died after it was sent, or a write whose database connection
// died in the round trip that carried its COMMIT.
const MsgOutcomeUnknown = "The desk did not confirm this request in time and it may have been carried out — check your orders and positions, or resend it with the same requestNonce (a replay never opens twice)"

// MsgChangeUnknown answers a change whose COMMIT the database may have run before the connection
// to it was lost (EUNKNOWN): an admin write, a token's issue or revocation.
const MsgChangeUnknown = "The connection to the database was lost as this change committed, so it may have been made: read it back (or find this request's X-Request-Id in the audit log) before sending it again"

// MsgDatabaseUnavailable answers a request that failed because the desk could not reach its
// database (EUNAVAILABLE): nothing was written.
const MsgDatabaseUnavailable = "The desk cannot reach its database right now — please retry shortly"

// MsgContended answers a write the database kept rolling back because other writes of the same
// account, order or position collided with it (deadlocks or lock waits past their retries,
// EUNAVAILABLE): nothing was written.
const MsgContended = "The desk is busy with other changes to the same account or position and could not apply this one — nothing was written; please retry shortly"

// MsgVenueUnavailable answers an EXTERNAL open or close while the execution venue cannot be
// reached (EUNAVAILABLE): nothing was sent and nothing written.
const MsgVenueUnavailable = "The execution venue is temporarily unavailable — nothing was sent; please retry shortly"

// MsgVenueOutcomeUnknown answers an EXTERNAL order or close the venue did not confirm
// (EUNKNOWN): it may have executed there. The desk never sends it again; the reconciler books
// what the venue did.
const MsgVenueOutcomeUnknown = "The execution venue did not confirm this request in time and it may have been carried out — the desk will book what the venue did; do not send it again, check your orders and positions shortly"
