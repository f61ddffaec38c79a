package desk_test

import (
	"log/slog"
	"testing"

	"fxdesk/internal/desk"
)

func TestNewWebNeedsKeeperAndGate(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	if _, err := desk.NewWeb(nil, nil, nil, nil, desk.Config{}, log); err == nil {
		t.Fatal("NewWeb accepted a web desk without a keeper or gate")
	}
}
