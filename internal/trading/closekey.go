package trading

import (
	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
)

// closeKey is the idempotency key of the deal of a close of position p from volumeBefore lots,
// on an account in mode: close:<position>:<volume before>, unique while a position's volume only
// falls — as it does in HEDGING and FIFO. A NETTING add grows it again (docs/orders.md,
// «Position modes»), so a close from a volume the position was closed from before would repeat
// the earlier close's key and be refused as its duplicate; a NETTING position's key also names
// its openVolume, which grows at every add while the volume falls between adds, so the pair
// never repeats: close:<position>:<openVolume>:<volume before>. The volume before stays the
// last field, where the ledger's readers take it from.
func closeKey(mode fx.PositionMode, p *book.Position, volumeBefore decimal.Decimal) string {
	if mode == fx.Netting {
		return "close:" + itoa(p.ID) + ":" + p.OpenVolume.String() + ":" + volumeBefore.String()
	}
	return "close:" + itoa(p.ID) + ":" + volumeBefore.String()
}
