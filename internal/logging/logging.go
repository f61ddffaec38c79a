// Package logging builds the desk's slog logger: tint for people, JSON for machines, with the
// process's secrets masked out of every record before either formats it (Redact).
package logging

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
)

// New returns a logger writing to w in format "text" (tint) or "json" at the given level, with
// secrets masked in every line (Redact; config.Config.Secrets lists a process's). Colour is used
// only when w is a terminal, so captured logs stay greppable.
func New(w io.Writer, format string, level slog.Level, secrets ...string) *slog.Logger {
	var h slog.Handler
	if format == "json" {
		h = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	} else {
		h = tint.NewTextHandler(w, &tint.Options{
			Level:      level,
			TimeFormat: time.DateTime + ".000",
			NoColor:    !isTerminal(w),
		})
	}
	return slog.New(Redact(h, secrets...))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
