package fx

// The texts DESIGN §4 fixes for a process that cannot quote: the first answers an open or a
// close, the second a withdrawal from an account with open positions.
const (
	MsgPricingUnavailable   = "Pricing is temporarily unavailable for this instrument — please retry shortly"
	MsgPositionsUnpriceable = "Pricing is currently unavailable for one of your open positions"
)

// MsgOutcomeUnknown answers a desk-priced request forwarded to the lease holder whose connection
// died after it was sent (EUNKNOWN): the holder may have acted on it.
const MsgOutcomeUnknown = "The desk did not confirm this request in time and it may have been carried out — check your orders and positions, or resend it with the same requestNonce (a replay never opens twice)"
