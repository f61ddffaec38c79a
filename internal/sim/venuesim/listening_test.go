package venuesim

import "testing"

// e2e and the soak start cmd/venuesim and read where it listens from this line.
func TestParseListeningReadsTheStartupLine(t *testing.T) {
	t.Parallel()
	const url, control, account = "http://127.0.0.1:8091", "http://127.0.0.1:8092", "101-001-0000001-001"
	tests := []struct {
		name, line string
		ok         bool
	}{
		{"as printed", ListeningLine(url, control, account) + "\n", true},
		{"without the newline", ListeningLine(url, control, account), true},
		{"a field it does not know", ListeningLine(url, control, account) + " latency=130ms", true},
		{"another line", "feedsim listening url=" + url, false},
		{"no control", "venuesim listening url=" + url + " account=" + account, false},
		{"an empty url", ListeningLine("", control, account), false},
		{"an empty line", "", false},
	}
	for _, tt := range tests {
		gotURL, gotControl, gotAccount, err := ParseListening(tt.line)
		switch {
		case tt.ok && (err != nil || gotURL != url || gotControl != control || gotAccount != account):
			t.Errorf("%s: ParseListening(%q) = %q %q %q %v", tt.name, tt.line, gotURL, gotControl, gotAccount, err)
		case !tt.ok && err == nil:
			t.Errorf("%s: ParseListening(%q) accepted it: %q %q %q", tt.name, tt.line, gotURL, gotControl, gotAccount)
		}
	}
}
