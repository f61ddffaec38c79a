// Package idp owns the bundled test identity provider: a stand-in for the host platform's
// sign-in, which signs JSON Web Tokens for its users and publishes the keys that verify them
// (docs/identity.md). It holds one or more signing keys (ES256 by default, RS256 and EdDSA on
// request), generated in memory at start and lost when it stops, and lets a test or a demo mint
// tokens and rotate keys.
//
// It is a test and demo tool, and must never be used as a production identity provider: it
// authenticates nobody (a loopback caller mints a token for any user it names), keeps its keys
// only in memory, and has no revocation. It must never be reachable for minting or rotating from
// anything but loopback, and never import the desk's verifier (internal/auth): the two meet only
// on the wire, a key set and signed tokens, as the desk and a real host do.
//
// # HTTP API (http://ADDR)
//
//	GET  /.well-known/jwks.json  the published key set (public keys, each with kid, alg, use=sig)
//	POST /mint   {"sub":"42","scope":"read trade","ttl":"15m","aud":"…","iss":"…","nbf":"-10s"}
//	             → {"token":"…","kid":"…","expiresAt":"RFC 3339"}
//	POST /rotate {"alg":"RS256","retire":true}   (body optional)
//	             → {"kid":"…","alg":"RS256","published":1}
//
// /mint: sub is required; scope is optional (absent, the token has no scope claim, which the
// desk reads as every scope); ttl defaults to 15m (1s to 24h); aud and iss default to the
// provider's; nbf, when given, is an offset from now. Claims: iss, aud, sub, iat, exp, jti and
// scope. /rotate: a new key, of alg (default the current key's), becomes the signing key; the
// old keys stay published so the tokens they signed keep verifying, until a rotate with
// "retire":true drops them. /mint and /rotate answer loopback callers only (403 otherwise).
// Errors answer {"error":{"code":"EINVALID","message":"…"}} with status 400, and change nothing.
package idp
