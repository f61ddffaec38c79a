// Package control owns the HTTP plumbing the bundled simulators (feedsim, venuesim, and the test
// identity provider internal/idp, whose mint and rotate are its control API) share for their
// control APIs: the loopback-only guard, the strict JSON body decoder, the control error shape
// {"error":{"code":"…","message":"…"}} and the JSON answer writer (the venue simulator's trading
// API writes through it too, in the venue's own error shape).
//
// It knows no simulator and no route: each simulator lists its own. It must never be used by
// the desk's own API (internal/api has its own error vocabulary), and never loosen the
// loopback guard: a control API moves prices and injects faults.
package control
