package config

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// strongSecret is what `openssl rand -hex 32` prints.
const strongSecret = "3f1c9a7be0d24486a15f6c2e9b08d73a5e4f1b2c8d9a0e7f6b5c4d3e2f1a0b9c"

// The rule is one sentence: length × log2(distinct characters) must reach 128 bits. What
// `openssl rand -hex 32` prints always passes; a repeated character, a short string and a
// 16-character string of hex digits do not, and no message repeats the secret.
func TestClusterSecretStrength(t *testing.T) {
	for range 1000 {
		b := make([]byte, 32)
		rand.Read(b)
		if err := CheckClusterSecret(hex.EncodeToString(b)); err != nil {
			t.Fatalf("openssl rand -hex 32 style secret refused: %v", err)
		}
	}
	if err := CheckClusterSecret(strongSecret); err != nil {
		t.Fatal(err)
	}
	for _, weak := range []string{"", "aaaaaaaaaaaaaaaa", "abababababababababababababababab", "0123456789abcdef", "test-cluster-secret-0123456789"} {
		err := CheckClusterSecret(weak)
		if err == nil {
			t.Errorf("%q accepted", weak)
			continue
		}
		if !strings.Contains(err.Error(), "openssl rand -hex 32") || (weak != "" && strings.Contains(err.Error(), weak)) {
			t.Errorf("%q: message %q", weak, err)
		}
	}
}
