package invariant

import (
	"context"
	"database/sql"
	"time"

	"github.com/shopspring/decimal"
)

// What the price lane saw (docs/soak.md, «The price lane»): the faults it played on the two
// price sources, every published tick it heard, the ticks the desk said it filtered, and the
// desk's per-symbol source selection sampled through the run.

// Price-lane fault kinds, as PriceFault.Kind and the summary name them. PriceGap is the process
// lane's gap fault as the price lane records it: a real move, on both sources at once.
const (
	PriceSpike         = "priceSpike"    // one off-market tick on one source (/control/spike)
	PricePrimarySilent = "primarySilent" // the primary sends nothing, its socket stays up (/control/silence)
	PriceBothSilent    = "bothSilent"    // both sources silent at once
	PriceOffset        = "priceOffset"   // one source quotes off the market (/control/offset)
	PricePrimaryDown   = "primaryDown"   // the primary drops every socket, again and again (/control/disconnect)
	PriceGap           = "gap"
)

// Source names the soak gives the desk's two price sources (FXDESK_PRICE_SOURCES).
const (
	SourcePrimary = "primary"
	SourceBackup  = "backup"
)

// PriceTolerance are the price lane's tolerances, stated in docs/soak.md and printed with the
// figures.
var PriceTolerance = struct {
	// Failover: a source silent past its threshold (the SilentAfter the desk reports for it, at
	// most SilentCap) may still be the active one this long after (a sweep every ≤ 100 ms, the
	// sample's own latency, a two-core box under load).
	Failover  time.Duration
	SilentCap time.Duration
	// WarmUp: a new holder's selection is not judged this long after its first sample (its
	// engine starts on the primary until a source quotes).
	WarmUp time.Duration
	// Match: a deal or hedge fill within this many pips of a filtered price is at it (markups in
	// the soak are below 2 pips; a filtered tick is at least the band, 30 pips, off the market).
	MatchPips float64
	// SpikeMatchPips: the same for an injected spike, whose price the soak knows as the source's
	// mid plus the pips (its spread unknown).
	SpikeMatchPips float64
	// Lookback: a deal is held against the ticks filtered this long before it.
	Lookback time.Duration
	// Backlog: a tick received this long after a price fault on its source ended may still
	// carry it: a holder woken from a stop or a zombie pause (the lease TTL + 0.5–3 s) reads its
	// sockets' backlog and stamps it with its own clock.
	Backlog time.Duration
	// Flush: the holder writes candles in batches; a tick this close to the end of its holder's
	// term (a kill loses the batch in memory) or to the snapshot is not judged yet. A flush
	// (every 2 s) can hang on a cut MySQL connection for its whole 10 s timeout before the next
	// one writes it: seed 745866271 judged ticks 10 s old at a check taken during a cut, and
	// the table held them once the cut ended.
	Flush time.Duration
	// Edge: a tick this close to a minute's edge may be in the candle on either side (the
	// builder's clock and the soak's receipt stamp differ by milliseconds).
	Edge time.Duration
}{Failover: time.Second, SilentCap: 10 * time.Second, WarmUp: 2 * time.Second, MatchPips: 5, SpikeMatchPips: 10, Lookback: 30 * time.Second,
	Backlog: 10 * time.Second, Flush: 25 * time.Second, Edge: 2 * time.Second}

// PriceFault is one price fault as it played.
type PriceFault struct {
	Kind    string    `json:"kind"`
	Sources []string  `json:"sources"`          // the sources it touched
	Symbol  string    `json:"symbol,omitempty"` // "" is every symbol
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"` // when the soak lifted it (a spike: its ms after the control answered)
	// A spike's: the source's mid just before (Ref), and the spike's mid (Price).
	Ref   float64 `json:"ref,omitempty"`
	Price float64 `json:"price,omitempty"`
	Pips  float64 `json:"pips,omitempty"`
}

func (f PriceFault) touches(source string) bool {
	for _, s := range f.Sources {
		if s == source {
			return true
		}
	}
	return false
}

// PublishedTick is one tick the holder published, as the soak heard it on the ticks channel the
// holder publishes every published tick on (mirror.StreamPublisher): its prices and receivedAt
// stamp, on the holder's clock, the source it came from, and the holder's term.
type PublishedTick struct {
	Symbol   string    `json:"symbol"`
	Source   string    `json:"source,omitempty"`
	Bid, Ask float64   `json:"-"`
	At       time.Time `json:"at"`
	Term     int64     `json:"term"`
}

// FilteredTick is one tick the desk listed as filtered (GET /api/admin/fx/price-sources/rejected).
type FilteredTick struct {
	Symbol     string    `json:"symbol"`
	Source     string    `json:"source"`
	Bid        float64   `json:"bid"`
	Ask        float64   `json:"ask"`
	ReceivedAt time.Time `json:"receivedAt"`
	Reason     string    `json:"reason"`
	Outcome    string    `json:"outcome"` // held, dropped, published-after-confirm
	DecidedAt  time.Time `json:"decidedAt"`
}

// SourceHealthSample is one source's health for one symbol in a SelectionSample.
type SourceHealthSample struct {
	Source      string        `json:"source"`
	Healthy     bool          `json:"healthy"`
	Reason      string        `json:"reason,omitempty"`
	SilentAfter time.Duration `json:"silentAfter"`
}

// SelectionSample is which source the holder quoted a symbol from, at some instant between Sent
// and Recv (GET /api/admin/fx/price-sources).
type SelectionSample struct {
	PID    int                  `json:"pid"`
	Sent   time.Time            `json:"sent"`
	Recv   time.Time            `json:"recv"`
	Symbol string               `json:"symbol"`
	Source string               `json:"source"`
	Health []SourceHealthSample `json:"health,omitempty"`
}

// PriceEvidence is the price lane's evidence (nil in Evidence: the lane did not run).
type PriceEvidence struct {
	Faults     []PriceFault
	Published  []PublishedTick
	Filtered   []FilteredTick
	Selections []SelectionSample
	// Heard is how long the soak listened to the ticks channel: a tick outside it was not seen.
	HeardFrom, HeardTo time.Time
}

// dbCandle is one M1 candle (fx_candle): its bid and ask lows and highs.
type dbCandle struct {
	Symbol          string
	Open            time.Time
	BidLow, BidHigh decimal.Decimal
	AskLow, AskHigh decimal.Decimal
	Ticks           int64
}

// dbHedgeFill is one hedge order the venue filled: its symbol, price and when it was last updated.
type dbHedgeFill struct {
	ID     int64
	Symbol string
	Price  decimal.Decimal
	At     time.Time
}

// readPrices reads the price lane's rows into s: the hedge fills, and the M1 candles — a desk
// without the candles table (or a cut that broke the read) leaves CandlesRead false, which
// candlesAgree reports, instead of failing the whole snapshot.
func readPrices(ctx context.Context, tx *sql.Tx, s *Snapshot) {
	s.Candles = map[string]dbCandle{}
	err := scanRows(ctx, tx, "SELECT `id`, `symbol`, `fillPrice`, `updatedAt` FROM `fx_hedge_order` WHERE `fillPrice` IS NOT NULL ORDER BY `id`", func(r *sql.Rows) error {
		var h dbHedgeFill
		err := r.Scan(&h.ID, &h.Symbol, &h.Price, &h.At)
		s.HedgeFills = append(s.HedgeFills, h)
		return err
	})
	if err != nil {
		s.CandlesErr = err.Error()
		return
	}
	err = scanRows(ctx, tx, "SELECT `symbol`, `openTime`, `bidLow`, `bidHigh`, `askLow`, `askHigh`, `ticks` FROM `fx_candle` WHERE `granularity` = 'M1'", func(r *sql.Rows) error {
		var c dbCandle
		if err := r.Scan(&c.Symbol, &c.Open, &c.BidLow, &c.BidHigh, &c.AskLow, &c.AskHigh, &c.Ticks); err != nil {
			return err
		}
		s.Candles[candleKey(c.Symbol, c.Open)] = c
		return nil
	})
	if err != nil {
		s.CandlesErr = err.Error()
		return
	}
	s.CandlesRead = true
}
