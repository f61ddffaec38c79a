// Package logging builds the desk's slog logger: tint for people, JSON for machines.
package logging

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/lmittmann/tint"
)

// New returns a logger writing to w in format "text" (tint) or "json" at the given level.
// Colour is used only when w is a terminal, so captured logs stay greppable.
func New(w io.Writer, format string, level slog.Level) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(tint.NewHandler(w, &tint.Options{
		Level:      level,
		TimeFormat: time.DateTime + ".000",
		NoColor:    !isTerminal(w),
	}))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
