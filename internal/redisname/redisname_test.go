package redisname_test

import (
	"strings"
	"testing"

	"fxdesk/internal/redisname"
)

func all(n redisname.Names) []string {
	return []string{n.Ticks(), n.QuoteMirrorSnapshot(), n.QuoteMirrorPins(), n.QuoteMirrorPinRequests(), n.Events(), n.TermsChanged(), n.TokensRevoked(), n.EngineLease("forex-trading")}
}

// The default prefix, set or left unset (the zero value), yields exactly the names operators'
// runbooks (docs/operations.md) and docs/architecture.md use.
func TestDefaultNamesAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	want := []string{"fx:ticks", "fx:quote-mirror:snapshot", "fx:quote-mirror:pins", "fx:quote-mirror:pin-requests", "fx:events", "fx:terms-changed", "fx:tokens-revoked", "engine:lease:forex-trading"}
	set, err := redisname.New("fx")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []redisname.Names{{}, set} {
		if got := all(n); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("names of prefix %q = %q, want %q", n.Prefix(), got, want)
		}
	}
}

// Another prefix prefixes every name, the lease key included, so installs sharing one Redis
// database share nothing.
func TestOtherPrefixPrefixesEveryName(t *testing.T) {
	t.Parallel()
	n, err := redisname.New("staging")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"staging:ticks", "staging:quote-mirror:snapshot", "staging:quote-mirror:pins", "staging:quote-mirror:pin-requests", "staging:events", "staging:terms-changed", "staging:tokens-revoked", "staging:engine:lease:forex-trading"}
	if got := all(n); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("names = %q, want %q", got, want)
	}
}

// No name of one install is a name of another, whatever the two prefixes: the default's bare
// lease key included, and prefixes chosen to look like parts of other names.
func TestPrefixesNeverShareAName(t *testing.T) {
	t.Parallel()
	prefixes := []string{"fx", "fx2", "engine", "staging", "ticks", "quote-mirror", "f", "fx.eu", "fx-eu", "fx_eu"}
	owner := map[string]string{}
	for _, p := range prefixes {
		n, err := redisname.New(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range all(n) {
			if o, ok := owner[name]; ok {
				t.Fatalf("%q is a name of both prefix %q and prefix %q", name, o, p)
			}
			owner[name] = p
		}
	}
}

// A prefix that could collide with another install's names, or that an operator could not type
// into redis-cli or a KEYS pattern, is refused with a message naming the rule.
func TestNewRefusesUnsafePrefixes(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "prod:eu", "fx*", "fx?", "a b", "fx\n", "é", "[fx]", strings.Repeat("x", 33)} {
		if _, err := redisname.New(p); err == nil || !strings.Contains(err.Error(), "1 to 32 letters, digits") {
			t.Errorf("New(%q) = %v, want a refusal naming the rule", p, err)
		}
	}
	for _, p := range []string{"fx", "staging", "prod-eu.2", "A_1", strings.Repeat("x", 32)} {
		if n, err := redisname.New(p); err != nil || n.Prefix() != p {
			t.Errorf("New(%q) = %v, %v", p, n.Prefix(), err)
		}
	}
}
