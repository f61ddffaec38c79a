// Package fx holds the desk's domain vocabulary: errors, and (as the desk grows) instruments,
// money and the types every other package speaks.
package fx

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in the API's error adapter; only EINTERNAL is logged
// as an error.
const (
	EINVALID     = "invalid"      // the request is malformed or breaks a rule (400/422)
	EUNAUTH      = "unauthorized" // no or bad credentials (401)
	EFORBIDDEN   = "forbidden"    // authenticated, not allowed (403)
	ENOTFOUND    = "not_found"    // no such thing, or not yours (404)
	ECONFLICT    = "conflict"     // the state does not allow it now (409)
	EUNAVAILABLE = "unavailable"  // try again later: pricing, arbiter, dependency (503)
	// EUNKNOWN: the request may or may not have taken effect (a forward to the lease holder lost
	// its connection after the request was sent). Retrying with the same requestNonce is safe (504).
	EUNKNOWN  = "outcome_unknown"
	EINTERNAL = "internal" // a defect or an unexpected failure (500)
	// EKEYREUSED: a requestNonce already bound to a different request (422, Stripe's rule). An
	// identical retry replays instead.
	EKEYREUSED = "idempotency_key_reused"
	// ELIMITED: a door's limit was reached — requests per second, streams, connections (429,
	// with Retry-After). Nothing was done.
	ELIMITED = "rate_limited"
	// ETOOLARGE: the request body is larger than the desk reads (413). Nothing was done.
	ETOOLARGE = "too_large"
)

// Error is an error a client may see: a code from the list above and a message written for the
// person who sent the request.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EINTERNAL.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err: an *Error's message, or a generic text
// for anything else, so internal details never reach a client.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "An internal error occurred."
}

// TooLarge refuses a request body longer than limit bytes. It is the one text of that refusal,
// so every process answers an oversized body alike: the lease holder, and a follower that would
// have forwarded it.
func TooLarge(limit int64) *Error {
	return Errorf(ETOOLARGE, "The request body is larger than the desk accepts (at most %d bytes); nothing was done.", limit)
}
