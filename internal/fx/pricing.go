package fx

// The texts DESIGN §4 fixes for a process that cannot quote: the first answers an open or a
// close, the second a withdrawal from an account with open positions.
const (
	MsgPricingUnavailable   = "Pricing is temporarily unavailable for this instrument — please retry shortly"
	MsgPositionsUnpriceable = "Pricing is currently unavailable for one of your open positions"
)

// MsgOutcomeUnknown answers a request whose outcome the desk cannot know (EUNKNOWN): a forward to
// the lease holder whose connection died after it was sent, or a write whose database connection
// died in the round trip that carried its COMMIT.
const MsgOutcomeUnknown = "The desk did not confirm this request in time and it may have been carried out — check your orders and positions, or resend it with the same requestNonce (a replay never opens twice)"

// MsgDatabaseUnavailable answers a request that failed because the desk could not reach its
// database (EUNAVAILABLE): nothing was written.
const MsgDatabaseUnavailable = "The desk cannot reach its database right now — please retry shortly"
