package auth

import "time"

// SetClock makes v read the time from now, so a test can move past a token's expiry or the
// cache's bound instead of sleeping. Set it before v is shared.
func (v *JWTVerifier) SetClock(now func() time.Time) { v.now = now }

// ForgetVerified empties v's cache of verified tokens, for the benchmark of an uncached Verify.
func (v *JWTVerifier) ForgetVerified() {
	v.mu.Lock()
	clear(v.checked)
	v.mu.Unlock()
}
