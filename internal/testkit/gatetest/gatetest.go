// Package gatetest is the lease that tests of lease-guarded work put under a real gate.Gate: it
// holds until the test calls Lose, and holds again after Restore.
package gatetest

import "sync/atomic"

// Lease satisfies gate.Lease. The zero value holds.
type Lease struct{ lost atomic.Bool }

// HoldsLease reports whether work may start now.
func (l *Lease) HoldsLease() bool { return !l.lost.Load() }

// Lose shuts the gate over l: work is dropped from now on.
func (l *Lease) Lose() { l.lost.Store(true) }

// Restore opens it again.
func (l *Lease) Restore() { l.lost.Store(false) }

// Lost reports whether Lose was called since the last Restore.
func (l *Lease) Lost() bool { return l.lost.Load() }
