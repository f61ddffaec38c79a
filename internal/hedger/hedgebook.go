package hedger

import (
	"context"
	"fmt"

	"github.com/shopspring/decimal"

	"fxdesk/internal/hedge"
)

// HedgeBook is the desk's hedge book (*hedge.Book) as the hedger uses it: its orders are sent
// as the hedger's (hedge.ByHedger), and only the hedger's positions are offered to Decide to
// close.
type HedgeBook struct{ Book *hedge.Book }

// Open sends the hedger's order of units on symbol (hedge.Book.Open's errors).
func (h HedgeBook) Open(ctx context.Context, symbol string, units decimal.Decimal) error {
	_, err := h.Book.Open(ctx, symbol, units, hedge.ByHedger)
	return err
}

// Close closes hedge position id, whole (hedge.Book.Close's errors).
func (h HedgeBook) Close(ctx context.Context, positionID int64) error {
	return h.Book.Close(ctx, positionID)
}

// State reads the SENDING hedge orders first and the open positions after: an order that fills
// between the two reads is counted both as unresolved and as a position, which holds its symbol
// for one more look — never as neither, which could send its hedge a second time.
func (h HedgeBook) State(ctx context.Context) (map[string]BookState, error) {
	_, orders, err := h.Book.State(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("hedge book orders: %w", err)
	}
	positions, err := h.Book.OpenPositions(ctx)
	if err != nil {
		return nil, fmt.Errorf("hedge book positions: %w", err)
	}
	out := map[string]BookState{}
	for _, o := range orders {
		if o.Status != hedge.StatusSending {
			continue
		}
		s := out[o.Symbol]
		s.Unresolved++
		out[o.Symbol] = s
	}
	for _, p := range positions {
		s := out[p.Symbol]
		s.Units = s.Units.Add(p.Units)
		if p.Why == hedge.WhyHedger {
			s.Positions = append(s.Positions, HedgePosition{ID: p.ID, Units: p.Units})
		}
		out[p.Symbol] = s
	}
	return out, nil
}
