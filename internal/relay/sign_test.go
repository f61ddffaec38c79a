package relay_test

import (
	"testing"
	"time"

	"fxdesk/internal/relay"
)

// A signature verifies with its secret, timestamp and body, and with nothing else; a timestamp
// past the tolerance is refused even when the signature matches.
func TestSignVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_760_000_000, 0)
	body := []byte(`{"id":42}`)
	sig := relay.Sign("s3cret-s3cret-s3cret", now, body)
	ts := "1760000000"
	if err := relay.Verify("s3cret-s3cret-s3cret", ts, sig, body, now.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	if err := relay.Verify("s3cret-s3cret-s3cret", ts, "v0=abc, "+sig, body, now, 5*time.Minute); err != nil {
		t.Errorf("a good signature among others: %v", err)
	}
	for name, c := range map[string]struct {
		secret, ts, sig string
		body            []byte
		at              time.Time
	}{
		"other secret":  {"other-secret-value", ts, sig, body, now},
		"other body":    {"s3cret-s3cret-s3cret", ts, sig, []byte(`{"id":43}`), now},
		"other time":    {"s3cret-s3cret-s3cret", "1760000001", sig, body, now},
		"stale":         {"s3cret-s3cret-s3cret", ts, sig, body, now.Add(6 * time.Minute)},
		"not a number":  {"s3cret-s3cret-s3cret", "x", sig, body, now},
		"no prefix":     {"s3cret-s3cret-s3cret", ts, sig[3:], body, now},
		"empty":         {"s3cret-s3cret-s3cret", ts, "", body, now},
		"not hex at v1": {"s3cret-s3cret-s3cret", ts, "v1=zz", body, now},
	} {
		if err := relay.Verify(c.secret, c.ts, c.sig, c.body, c.at, 5*time.Minute); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("1760000000", "v1=00", []byte("{}"))
	f.Add("1760000000", relay.Sign("other-secret-value", time.Unix(1_760_000_000, 0), []byte("{}")), []byte("{}"))
	f.Fuzz(func(t *testing.T, ts, sig string, body []byte) {
		// Never panics, and never verifies: a fuzzer cannot make an HMAC under a secret it
		// does not know, so any success is a hole in Verify.
		if err := relay.Verify("fuzz-secret-value", ts, sig, body, time.Unix(1_760_000_000, 0), time.Hour); err == nil {
			t.Fatalf("verified ts %q sig %q body %q without the secret", ts, sig, body)
		}
	})
}
