package redisname

import (
	"fmt"
	"regexp"
)

// DefaultPrefix is the prefix of an install that sets none; its names are the historic ones.
const DefaultPrefix = "fx"

// validPrefix keeps names short, readable in redis-cli, and free of ':' (the separator) and of
// glob characters an operator's KEYS or PSUBSCRIBE pattern would trip on.
var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// Names derives every Redis name of one install from its prefix. The zero value is the default
// install (prefix "fx"), so a part built without Names keeps the documented names.
type Names struct {
	prefix string
}

// New returns the names for prefix, refusing one that is empty, longer than 32 characters or
// holds anything but letters, digits, '_', '.' and '-'.
func New(prefix string) (Names, error) {
	if !validPrefix.MatchString(prefix) {
		return Names{}, fmt.Errorf("the Redis prefix %q must be 1 to 32 letters, digits, '_', '.' or '-' (for example fx or staging)", prefix)
	}
	return Names{prefix: prefix}, nil
}

// Prefix is the install's prefix ("fx" for the zero value).
func (n Names) Prefix() string {
	if n.prefix == "" {
		return DefaultPrefix
	}
	return n.prefix
}

func (n Names) name(s string) string { return n.Prefix() + ":" + s }

// Ticks is the pub/sub channel the lease holder publishes every accepted tick on.
func (n Names) Ticks() string { return n.name("ticks") }

// QuoteMirrorSnapshot is the string key holding the quote mirror's latest snapshot.
func (n Names) QuoteMirrorSnapshot() string { return n.name("quote-mirror:snapshot") }

// QuoteMirrorPins is the hash key of conversion legs the mirror's followers asked for.
func (n Names) QuoteMirrorPins() string { return n.name("quote-mirror:pins") }

// QuoteMirrorPinRequests is the pub/sub channel a follower nudges the publisher on after a pin.
func (n Names) QuoteMirrorPinRequests() string { return n.name("quote-mirror:pin-requests") }

// Events is the stream key the lease holder's relay appends every event of the outbox to, for
// the host platform's consumer groups (docs/events.md).
func (n Names) Events() string { return n.name("events") }

// TermsChanged is the pub/sub channel a web process publishes on after an admin write: the lease
// holder reads the audit log for changes of how accounts are marked (catalog.TermsFollower).
func (n Names) TermsChanged() string { return n.name("terms-changed") }

// TokensRevoked is the pub/sub channel a revocation is announced on (the token's id, never the
// token): every web process drops what it remembers of that token at once (docs/identity.md).
func (n Names) TokensRevoked() string { return n.name("tokens-revoked") }

// EngineLease is the string key mirroring the lease row for key (lease.Key): the bare
// engine:lease:<key> under the default prefix, as operators know it (docs/operations.md), and
// <prefix>:engine:lease:<key> under any other, so installs sharing a database never share it.
func (n Names) EngineLease(key string) string {
	if n.Prefix() == DefaultPrefix {
		return "engine:lease:" + key
	}
	return n.name("engine:lease:" + key)
}
