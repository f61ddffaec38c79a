package config

import (
	"fmt"
	"math"
)

// minClusterSecretBits is the strength FXDESK_CLUSTER_SECRET must reach: an HMAC-SHA256 key
// nobody can search for. `openssl rand -hex 32` gives 256.
const minClusterSecretBits = 128

// CheckClusterSecret refuses a cluster secret estimated below 128 bits, the estimate being its
// length times log2 of the number of distinct characters in it. The estimate is generous (it
// cannot tell a phrase a person chose from random characters), so it catches what is plainly
// weak — a short string, one character repeated — and the message says how to make a real one.
// It is the one home of the rule: Load applies it to FXDESK_CLUSTER_SECRET and forward.NewSigner
// to any key it is given. The secret itself never appears in the error.
func CheckClusterSecret(secret string) error {
	bits := secretBits(secret)
	if bits >= minClusterSecretBits {
		return nil
	}
	return fmt.Errorf("FXDESK_CLUSTER_SECRET is too weak: about %.0f bits (%d characters × log2 of %d distinct), at least %d bits needed; generate one with: openssl rand -hex 32",
		bits, len([]rune(secret)), distinct(secret), minClusterSecretBits)
}

func secretBits(secret string) float64 {
	n := distinct(secret)
	if n < 2 {
		return 0
	}
	return float64(len([]rune(secret))) * math.Log2(float64(n))
}

func distinct(s string) int {
	seen := map[rune]bool{}
	for _, r := range s {
		seen[r] = true
	}
	return len(seen)
}
