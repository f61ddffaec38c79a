package trading

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID names a ledger entry that came with no requestNonce: it can never collide, so the
// request is simply not idempotent, which is what the client asked for by sending none.
func randomID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
