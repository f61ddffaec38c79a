package api

import "fxdesk/internal/fx"

// decodePositionMode reads an account group's positionMode (docs/orders.md, «Position modes»);
// nil leaves it as it is. Exact case, as the enum is written everywhere else.
func decodePositionMode(s *string) (*fx.PositionMode, error) {
	if s == nil {
		return nil, nil
	}
	m := fx.PositionMode(*s)
	if !m.Valid() {
		return nil, fx.Errorf(fx.EINVALID, "positionMode must be HEDGING (several positions per symbol), NETTING (one per symbol) or FIFO (one side, oldest closed first), not %q.", *s)
	}
	return &m, nil
}
