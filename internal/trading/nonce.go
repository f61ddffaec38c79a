package trading

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/shopspring/decimal"

	"fxdesk/internal/book"
	"fxdesk/internal/fx"
)

// A requestNonce binds its request: a retry of the same request replays its first answer,
// another request under the same nonce is refused (fx.EKEYREUSED).

// replay answers request r with the order o its requestNonce already names (found ok, or the
// lookup's err): the original, marked Replayed, when r is the request that wrote it; EKEYREUSED
// when r is another request sent under the same nonce.
func (s *Service) replay(ctx context.Context, r OrderRequest, o book.Order, ok bool, err error) (OrderResult, error) {
	if err != nil {
		return OrderResult{}, err
	}
	if !ok {
		return OrderResult{}, fmt.Errorf("request nonce collided but the original order is gone")
	}
	if o.RequestHash != nil && *o.RequestHash != r.fingerprint() {
		return OrderResult{}, errKeyReused(r, OrderRequest{AccountID: o.AccountID, Symbol: o.Symbol, Side: o.Side, Type: o.Type, Volume: o.Volume}, o.ID)
	}
	out := OrderResult{Order: o, Replayed: true}
	if o.PositionID != nil {
		p, err := book.LoadPosition(ctx, s.db, 0, *o.PositionID)
		if err != nil {
			return OrderResult{}, err
		}
		out.Position = &p
	}
	return out, nil
}

// fingerprint is what a requestNonce binds (fx_order.requestHash): the SHA-256, in hex, of the
// request's fields in their canonical form — decimals without trailing zeros, timeInForce GTC
// when left out, expiresAt in UTC to the millisecond it is stored at — so a retry of the same
// request matches however its JSON spelled the numbers, and any other request does not.
func (r OrderRequest) fingerprint() string {
	opt := func(d *decimal.Decimal) string {
		if d == nil {
			return "-"
		}
		return d.String()
	}
	tif := r.TimeInForce
	if tif == "" {
		tif = fx.GTC
	}
	exp := "-"
	if r.ExpiresAt != nil {
		exp = r.ExpiresAt.UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano)
	}
	b := fmt.Appendf(nil, "%d\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s",
		r.AccountID, r.Symbol, r.Side, r.Type, r.Volume.String(), opt(r.Price), opt(r.SL), opt(r.TP), tif, exp)
	if r.PriceBound != nil {
		// Only when set, so that the fingerprints stored before bounds existed still match.
		b = fmt.Appendf(b, "\npriceBound %s", r.PriceBound)
	}
	sum := sha256.Sum256(append(b, limitFingerprint(r)...))
	return hex.EncodeToString(sum[:])
}

// hash is the fingerprint to store with the order r writes: nil when r has no requestNonce.
func (r OrderRequest) hash() *string {
	if r.RequestNonce == "" {
		return nil
	}
	h := r.fingerprint()
	return &h
}

// errKeyReused refuses request r, whose requestNonce already names another request: first, the
// order it wrote (id, or 0 while that order is in the same batch and has none yet).
func errKeyReused(r, first OrderRequest, id int64) error {
	what := fmt.Sprintf("%s %s %s %s", first.Side, first.Type, first.Volume, first.Symbol)
	if id != 0 {
		what = fmt.Sprintf("order %d, %s", id, what)
	}
	return fx.Errorf(fx.EKEYREUSED, "requestNonce %q was already used on account %d for a different order (%s); nothing was done. "+
		"Send a new order with a new requestNonce; resending the original request unchanged replays it.", r.RequestNonce, r.AccountID, what)
}
