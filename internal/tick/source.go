package tick

import (
	"context"
	"time"
)

// A Source is one price provider connection: the provider websocket (NewWebsocketSource), FIX
// market data from an LP session (package fixmd), a bundled simulator. An engine holds several,
// in priority order (Config.Sources: the first is the primary), and quotes each symbol from the
// first healthy one.
type Source interface {
	// Name is unique per desk: "primary", "backup", "lp-fix", …
	Name() string
	// Run connects, subscribes feed.Wanted() (desk symbols like EURUSD), follows
	// feed.WantedChanged() live, resubscribes after every reconnect, offers every quote,
	// reports its connection via feed.SetConnected, reconnects with back-off itself, and
	// returns nil when ctx ends.
	Run(ctx context.Context, feed Feed) error
}

// Feed is the engine's side of one source. Its methods are safe for concurrent use.
type Feed interface {
	// Wanted is the desk symbols to subscribe, sorted.
	Wanted() []string
	// WantedChanged signals that Wanted changed: capacity 1, coalescing, one channel per source.
	WantedChanged() <-chan struct{}
	// Offer hands the engine one quote. The engine validates it (dated, positive, not crossed),
	// stamps ReceivedAt with its own clock, filters, selects and publishes it — or not.
	Offer(symbol string, bid, ask float64, providerTime time.Time)
	// SetMarketOpen records that the provider announced a session change for symbol.
	SetMarketOpen(symbol string, open bool)
	// SetConnected reports the session up, or down with why.
	SetConnected(up bool, reason error)
}

// Selection is one wanted symbol's choice of source, as the dealer sees it.
type Selection struct {
	Symbol    string
	Source    string         // the active source: the one the symbol's published quotes come from
	Pinned    string         // the source a dealer pinned the symbol to; "" when not pinned
	Halted    bool           // a dealer halted quoting: SymbolState is QUOTING_HALTED, nothing is published
	Since     time.Time      // when Source became active (Config.Now)
	Failovers uint64         // switches away from a source since the engine started
	Health    []SourceHealth // one per source, in priority order
}

// SourceHealth is one source's health for one symbol.
type SourceHealth struct {
	Source       string
	Healthy      bool
	Reason       string        // why not healthy: "disconnected", "no quote", "silent", "off-band"; "" when healthy
	LastTickAge  time.Duration // Config.Now − the source's last accepted tick for the symbol; 0 if none
	TickInterval time.Duration // EWMA of the source's inter-arrival time for the symbol; 0 until two ticks
	SilentAfter  time.Duration // the silence threshold derived from TickInterval
}

// SourceStatus is one source's connection and counters.
type SourceStatus struct {
	Name           string
	Connected      bool
	ConnectedSince time.Time // zero when not connected
	LastError      string    // why the last session ended ("" if none has)
	Accepted       uint64    // valid quotes offered for a wanted symbol
	Held           uint64    // ticks the spike filter held
	Dropped        uint64    // held ticks dropped as not confirmed
	Published      uint64    // ticks that reached the quote slots
}

// RejectedTick is one tick the spike filter held, with what became of it.
type RejectedTick struct {
	Symbol     string
	Source     string
	Bid, Ask   float64
	ReceivedAt time.Time
	Reason     string    // RejectSpike or RejectDisagrees
	Outcome    string    // OutcomeHeld, OutcomeDropped or OutcomePublished
	DecidedAt  time.Time // when the outcome was decided; zero while held
}

// Reasons and outcomes in RejectedTick.
const (
	RejectSpike     = "spike"
	RejectDisagrees = "disagrees"
	// RejectUnreferenced: on a desk with several sources, a tick with no published price to
	// compare it with (a holder's first, or the first after a quiet) and no other source to
	// agree with it waits for its confirmation like a spike.
	RejectUnreferenced = "unreferenced"
	OutcomeHeld        = "held"
	OutcomeDropped     = "dropped"
	OutcomePublished   = "published-after-confirm"
)

// Switch is one change of a symbol's active source.
type Switch struct {
	Symbol string
	From   string
	To     string
	Reason string // e.g. "primary silent", "primary disconnected", "fail-back after hold-down", "pinned"
	At     time.Time
}

// FilterConfig shapes the spike filter. Zero fields take the defaults beside them.
type FilterConfig struct {
	// Disabled publishes every valid tick of the active source unfiltered.
	Disabled bool
	// Window is how many recent absolute mid moves of published ticks the band is built from.
	// Default 32.
	Window int
	// MinMoves is how many moves the window needs before the robust band applies; with fewer
	// the floor alone decides. Default 8.
	MinMoves int
	// K multiplies the robust spread (1.4826 × MAD) of the moves. Default 12.
	K float64
	// FloorPips is the band's floor: a move of at most this many pips is never a spike.
	// Default 30.
	FloorPips float64
	// BandPips is how far a source's mid may stand from the median mid of the other healthy
	// sources before it disagrees. Default 30.
	BandPips float64
	// ConfirmAfter publishes a held tick that no later tick of its source contradicted within
	// this long, when no other healthy source exists to contradict it. Default 1s.
	ConfirmAfter time.Duration
	// RejectedRing is how many filtered ticks Rejected keeps. Default 1000.
	RejectedRing int
}

// FailoverConfig shapes per-symbol source selection. Zero fields take the defaults beside them.
type FailoverConfig struct {
	// SilentFactor × a source's mean inter-arrival time for a symbol (EWMA), clamped to
	// [SilentMin, SilentMax], is how long the source may be silent on the symbol before it is
	// unhealthy for it. Defaults 10, 1s, 10s.
	SilentFactor         float64
	SilentMin, SilentMax time.Duration
	// HoldDown is how long a higher-priority source must have been continuously healthy before
	// a symbol fails back to it. Default 10s.
	HoldDown time.Duration
	// Sweep is how often silence is checked. Default 100ms.
	Sweep time.Duration
}

// DefaultPipSize is 0.01 for a symbol quoted in JPY and 0.0001 otherwise.
func DefaultPipSize(symbol string) float64 {
	if len(symbol) == 6 && symbol[3:] == "JPY" {
		return 0.01
	}
	return 0.0001
}
