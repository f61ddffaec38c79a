package logging

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
)

// Masked is what a secret reads as in a log line; config.LogValue masks with the same string.
const Masked = "****"

// MinSecretLen is the shortest secret Redact masks. A shorter one cannot be told apart from
// ordinary words ("test", a three-letter password), so masking it would garble every line that
// happens to contain it; a secret that short is no protection anyway.
const MinSecretLen = 8

// Redact wraps inner so that no record it formats contains any of secrets: the message, every
// attribute key and value (groups and LogValuers resolved first), errors and other values as
// their text would read. It works on the record before inner formats it, so text and JSON
// output alike see only the masked form, whatever each would escape. Secrets shorter than
// MinSecretLen are left alone (see there). With nothing to mask it returns inner.
//
// Masking at the last step is the net under the sources, not a licence for them: code still
// keeps secrets out of the errors it builds, and the status page and API, which do not log,
// show those errors as they are.
func Redact(inner slog.Handler, secrets ...string) slog.Handler {
	var keep []string
	for _, s := range secrets {
		if len(s) >= MinSecretLen && !slices.Contains(keep, s) {
			keep = append(keep, s)
		}
	}
	if len(keep) == 0 {
		return inner
	}
	// Longest first: where one secret contains another, the whole of the longer one is masked.
	slices.SortFunc(keep, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(keep))
	for _, s := range keep {
		pairs = append(pairs, s, Masked)
	}
	return &redactor{inner: inner, secrets: keep, replacer: strings.NewReplacer(pairs...)}
}

type redactor struct {
	inner    slog.Handler
	secrets  []string
	replacer *strings.Replacer
}

func (h *redactor) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *redactor) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *redactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactor{inner: h.inner.WithAttrs(clean), secrets: h.secrets, replacer: h.replacer}
}

func (h *redactor) WithGroup(name string) slog.Handler {
	return &redactor{inner: h.inner.WithGroup(h.text(name)), secrets: h.secrets, replacer: h.replacer}
}

// holds reports whether s contains a secret: most strings do not, and are passed on untouched.
func (h *redactor) holds(s string) bool {
	for _, secret := range h.secrets {
		if strings.Contains(s, secret) {
			return true
		}
	}
	return false
}

func (h *redactor) text(s string) string {
	if !h.holds(s) {
		return s
	}
	return h.replacer.Replace(s)
}

func (h *redactor) attr(a slog.Attr) slog.Attr {
	return slog.Attr{Key: h.text(a.Key), Value: h.value(a.Value)}
}

func (h *redactor) value(v slog.Value) slog.Value {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); h.holds(s) {
			return slog.StringValue(h.replacer.Replace(s))
		}
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, a := range group {
			clean[i] = h.attr(a)
		}
		return slog.GroupValue(clean...)
	case slog.KindAny:
		return h.anyValue(v)
	}
	return v
}

// anyValue checks a value in every form a handler may print it: an error's text, fmt's %+v (the
// text handlers), MarshalText and MarshalJSON. One that holds a secret is replaced by its masked
// text; an error stays an error, so handlers still show it as one.
func (h *redactor) anyValue(v slog.Value) slog.Value {
	if rv := reflect.ValueOf(v.Any()); rv.Kind() == reflect.Pointer && rv.IsNil() {
		// A nil pointer holds no secret; a value-receiver MarshalText or Error through it panics.
		return v
	}
	switch x := v.Any().(type) {
	case nil:
		return v
	case error:
		if s := x.Error(); h.holds(s) {
			return slog.AnyValue(maskedError(h.replacer.Replace(s)))
		}
		return v
	default:
		s := fmt.Sprintf("%+v", x)
		leaks := h.holds(s)
		if tm, ok := x.(encoding.TextMarshaler); ok && !leaks {
			b, err := tm.MarshalText()
			leaks = err == nil && h.holds(string(b))
		}
		if !leaks {
			b, err := json.Marshal(x)
			leaks = err == nil && h.holds(string(b))
		}
		if leaks {
			return slog.StringValue(h.replacer.Replace(s))
		}
		return v
	}
}

// maskedError is an error whose text had a secret masked out of it.
type maskedError string

func (e maskedError) Error() string { return string(e) }
