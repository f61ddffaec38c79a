package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

const (
	feedKey  = "pk_live_7f3a9c1e5b"
	venueTok = "venue-token-4d2e8a"
	// inner is a secret inside another: the longer one must be masked whole.
	inner = "7f3a9c1e"
)

// keyed is a value whose every printed form carries the key: %+v, MarshalText and MarshalJSON.
type keyed struct{ URL string }

// textOnly shows the key only through MarshalText, the text handler's form for it.
type textOnly struct{}

func (textOnly) MarshalText() ([]byte, error) { return []byte("wss://feed/?apiKey=" + feedKey), nil }
func (textOnly) String() string               { return "textOnly" }

// lazy carries the key in a LogValuer, resolved only by the handler.
type lazy struct{}

func (lazy) LogValue() slog.Value {
	return slog.GroupValue(slog.String("token", venueTok), slog.Int("n", 1))
}

// logEverywhere writes one record through every path a secret can reach a handler by: the
// message, logger attributes and groups from With/WithGroup, strings, errors wrapped twice
// (a url.Error, as net/http builds on a failed dial), nested groups, a LogValuer, a struct and a
// TextMarshaler.
func logEverywhere(log *slog.Logger) {
	dial := &url.Error{Op: "Get", URL: "ws://127.0.0.1:1/forex?apiKey=" + feedKey, Err: errors.New("connection refused")}
	err := fmt.Errorf("dial provider: %w", fmt.Errorf("failed to WebSocket dial: %w", dial))
	log.With(slog.String("feed", "wss://x?apiKey="+feedKey)).WithGroup("venue").With(slog.String("auth", "Bearer "+venueTok)).
		WarnContext(context.Background(), "provider connection ended ("+feedKey+"); reconnecting",
			slog.Any("error", err),
			slog.Group("outer", slog.Group("inner", slog.String("key", feedKey), slog.Any("err", errors.New("401 for "+venueTok)))),
			slog.Any("lazy", lazy{}),
			slog.Any("struct", keyed{URL: "wss://feed/?apiKey=" + feedKey}),
			slog.Any("text", textOnly{}),
			slog.String("short", "contains "+inner+" alone"),
			slog.Int("plain", 42))
}

// Every secret is masked in text (tint) and JSON output, whichever way it reached the record,
// while what is not a secret reads as before.
func TestRedactMasksEverySecretInTextAndJSON(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			logEverywhere(New(&buf, format, slog.LevelDebug, feedKey, venueTok, inner, "", "short"))
			out := buf.String()
			for _, secret := range []string{feedKey, venueTok, inner} {
				if strings.Contains(out, secret) {
					t.Errorf("%s output holds secret %q:\n%s", format, secret, out)
				}
			}
			// The masks are there (so the line was not just dropped), the rest is intact, and the
			// longer secret was masked whole rather than around the shorter one inside it.
			for _, want := range []string{"provider connection ended (" + Masked + "); reconnecting", "apiKey=" + Masked,
				"Bearer " + Masked, "connection refused", "401 for " + Masked, "contains " + Masked + " alone", "42"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s output lacks %q:\n%s", format, want, out)
				}
			}
			if strings.Contains(out, "pk_live_") {
				t.Errorf("%s output holds part of the key: the shorter secret inside it was masked first:\n%s", format, out)
			}
			if format == "json" {
				var line map[string]any
				if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
					t.Fatalf("JSON output no longer one object: %v\n%s", err, out)
				}
				venue, _ := line["venue"].(map[string]any)
				outer, _ := venue["outer"].(map[string]any)
				innerGroup, _ := outer["inner"].(map[string]any)
				if innerGroup["key"] != Masked || venue["auth"] != "Bearer "+Masked {
					t.Errorf("nested groups not kept as groups: %v", line)
				}
			}
		})
	}
}

// An error that held a secret is still an error to the handler (tint and JSON print errors in
// their own way), and one that held none is passed on as the very same value.
func TestRedactKeepsErrorsErrors(t *testing.T) {
	var got []slog.Attr
	h := Redact(recorder{&got}, feedKey)
	clean := errors.New("connection refused")
	slog.New(h).Info("x", slog.Any("leaky", errors.New("GET ?apiKey="+feedKey)), slog.Any("clean", clean))
	if len(got) != 2 {
		t.Fatalf("attrs = %v", got)
	}
	if e, ok := got[0].Value.Any().(error); !ok || e.Error() != "GET ?apiKey="+Masked {
		t.Errorf("leaky error became %#v", got[0].Value.Any())
	}
	if got[1].Value.Any() != clean {
		t.Errorf("clean error replaced by %#v", got[1].Value.Any())
	}
}

// Secrets too short to mask safely are ignored, and with none left the handler is not wrapped.
func TestRedactIgnoresShortSecrets(t *testing.T) {
	inner := slog.NewJSONHandler(&bytes.Buffer{}, nil)
	if h := Redact(inner, "", "test", strings.Repeat("x", MinSecretLen-1)); h != inner {
		t.Errorf("Redact with only short secrets wrapped the handler: %T", h)
	}
	var buf bytes.Buffer
	New(&buf, "json", slog.LevelInfo, "test").Info("a test line")
	if !strings.Contains(buf.String(), "a test line") {
		t.Errorf("a short secret garbled the line: %s", buf.String())
	}
}

// recorder keeps the attributes a handler is given, as they arrive.
type recorder struct{ attrs *[]slog.Attr }

func (r recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool { *r.attrs = append(*r.attrs, a); return true })
	return nil
}
func (r recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r recorder) WithGroup(string) slog.Handler      { return r }

// nilText is a TextMarshaler with a value receiver: a nil pointer to it panics in MarshalText, as
// a nil *decimal.Decimal does.
type nilText struct{ s string }

func (n nilText) MarshalText() ([]byte, error) { return []byte(n.s), nil }

// A nil pointer to a value-receiver TextMarshaler (a nil *decimal.Decimal: "close all units")
// is logged as nil, in text and JSON, instead of panicking the process in the redactor.
func TestRedactLogsANilTextMarshalerPointer(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		New(&buf, format, slog.LevelDebug, feedKey).Info("closed", slog.Any("units", (*nilText)(nil)))
		if out := buf.String(); !strings.Contains(out, "units") || !strings.Contains(out, "closed") {
			t.Fatalf("%s: %q", format, out)
		}
	}
}
