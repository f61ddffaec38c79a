package trading

import "fxdesk/internal/fx"

// ocoLegError is err of leg i of an OCO pair, its message naming the leg — except a 503's,
// whose text is the documented one a client retries on (fx.MsgPricingUnavailable, …): the
// condition is the desk's, not the leg's, and a pair meets it as a single order does.
func ocoLegError(i int, err error) error {
	if fx.ErrorCode(err) == fx.EUNAVAILABLE {
		return err
	}
	return fx.Errorf(fx.ErrorCode(err), "legs[%d]: %s", i, fx.ErrorMessage(err))
}
