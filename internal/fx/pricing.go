package fx

// The texts DESIGN §4 fixes for a process that cannot quote: the first answers an open or a
// close, the second a withdrawal from an account with open positions.
const (
	MsgPricingUnavailable   = "Pricing is temporarily unavailable for this instrument — please retry shortly"
	MsgPositionsUnpriceable = "Pricing is currently unavailable for one of your open positions"
)
