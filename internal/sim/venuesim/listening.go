package venuesim

import (
	"fmt"
	"strings"
)

// listeningPrefix starts the line cmd/venuesim prints once both its listeners are bound.
const listeningPrefix = "venuesim listening "

// ListeningLine is the line cmd/venuesim prints on stdout once it listens (without the newline),
// so a process that starts it knows where it is: read it back with ParseListening.
func ListeningLine(url, control, account string) string {
	return fmt.Sprintf("%surl=%s control=%s account=%s", listeningPrefix, url, control, account)
}

// ParseListening reads a ListeningLine (a trailing newline is allowed) into the trading API's
// base URL, the control API's and the account id. It fails on any other line, or one that lacks
// one of the three; fields it does not know are ignored.
func ParseListening(line string) (url, control, account string, err error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), strings.TrimSpace(listeningPrefix))
	if !ok {
		return "", "", "", fmt.Errorf("venuesim: %q is not a %q line", line, strings.TrimSpace(listeningPrefix))
	}
	for _, f := range strings.Fields(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "url":
			url = v
		case "control":
			control = v
		case "account":
			account = v
		}
	}
	if url == "" || control == "" || account == "" {
		return "", "", "", fmt.Errorf("venuesim: listening line %q lacks url, control or account", line)
	}
	return url, control, account, nil
}
