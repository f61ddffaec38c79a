package fixvenue

import (
	"fmt"
	"strings"
)

// listeningPrefix starts the line cmd/fixvenue prints once its listeners are bound.
const listeningPrefix = "fixvenue listening "

// ListeningLine is the line cmd/fixvenue prints on stdout once it listens (without the newline):
// where the desk connects, the control API's URL and the session's comp ids as the desk names
// them (its SenderCompID first).
func ListeningLine(addr, control, deskCompID, venueCompID string) string {
	return fmt.Sprintf("%saddr=%s control=%s sender=%s target=%s", listeningPrefix, addr, control, deskCompID, venueCompID)
}

// MarketDataListening is what cmd/fixvenue appends to its ListeningLine: the market-data
// session's comp ids as the desk names them (its SenderCompID first). ParseListeningMD reads them.
func MarketDataListening(mdDeskCompID, mdVenueCompID string) string {
	return fmt.Sprintf(" md-sender=%s md-target=%s", mdDeskCompID, mdVenueCompID)
}

// ParseListeningMD reads the market-data session's comp ids (the desk's SenderCompID first) from
// a ListeningLine with MarketDataListening appended.
func ParseListeningMD(line string) (sender, target string, err error) {
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "md-sender":
			sender = v
		case "md-target":
			target = v
		}
	}
	if sender == "" || target == "" {
		return "", "", fmt.Errorf("fixvenue: listening line %q lacks md-sender or md-target", line)
	}
	return sender, target, nil
}

// ParseListening reads a ListeningLine back.
func ParseListening(line string) (addr, control, sender, target string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(listeningPrefix))
	if !ok {
		return "", "", "", "", fmt.Errorf("fixvenue: %q is not a %q line", line, strings.TrimSpace(listeningPrefix))
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "addr":
			addr = v
		case "control":
			control = v
		case "sender":
			sender = v
		case "target":
			target = v
		}
	}
	if addr == "" || control == "" || sender == "" || target == "" {
		return "", "", "", "", fmt.Errorf("fixvenue: listening line %q lacks addr, control, sender or target", line)
	}
	return addr, control, sender, target, nil
}
