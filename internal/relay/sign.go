package relay

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of every webhook post. The signature is HMAC-SHA256, keyed with the endpoint's
// secret, over the timestamp header's value, a '.', and the body's bytes, hex-encoded after
// "v1=" (docs/events.md, "Verifying a webhook").
const (
	HeaderEventID   = "Fxdesk-Event-Id"
	HeaderTimestamp = "Fxdesk-Timestamp" // Unix seconds when the post was signed
	HeaderSignature = "Fxdesk-Signature" // v1=<hex>
)

// Sign is the signature header's value of body sent at ts with secret.
func Sign(secret string, ts time.Time, body []byte) string {
	return "v1=" + hex.EncodeToString(mac(secret, strconv.FormatInt(ts.Unix(), 10), body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a received post as a receiver should: the signature header (one or more
// comma-separated v1= values) matches body and the timestamp header under secret, and the
// timestamp is within tolerance of now, so a captured post cannot be replayed later.
func Verify(secret, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook timestamp %q is not Unix seconds", timestamp)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook timestamp is %s away from now, past the %s tolerance", d.Round(time.Second), tolerance)
	}
	want := mac(secret, timestamp, body)
	for _, part := range strings.Split(signature, ",") {
		got, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(part), "v1="))
		if err == nil && strings.HasPrefix(strings.TrimSpace(part), "v1=") && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("webhook signature does not match")
}
