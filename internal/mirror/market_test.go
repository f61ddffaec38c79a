package mirror

import (
	"math"
	"time"

	"fxdesk/internal/tick"
)

// BenchMarket stands in for a live feed between two publishes: every call to Move gives each
// symbol a new bid and ask and a receivedAt a little before now, as the tick engine holds them:
// each moved quote is a new one in its slot, the old one left as it was (the engine never writes
// a stored quote, so the publisher may read it while the next tick arrives).
// Most quotes arrived within the last few seconds; some symbols tick rarely, so a few are
// minutes old. Prices are spread over the magnitudes and digits the desk quotes (five decimals
// below 10, three for yen-like prices, two for metal-like ones), so their text varies in length.
// It is deterministic: the same sequence of Move calls gives the same quotes.
type BenchMarket struct {
	Symbols []string
	Slots   []*tick.Quote // the quotes in symbol order; Move stores new ones
	digits  map[string]int
	mid     []float64
	step    []float64
	r       uint64
}

// NewBenchMarket makes a market of the given symbols (sorted, desk symbols).
func NewBenchMarket(symbols []string) *BenchMarket {
	m := &BenchMarket{Symbols: symbols, digits: make(map[string]int, len(symbols)), r: 0x9E3779B97F4A7C15}
	for i, s := range symbols {
		d, mid := 5, 0.5+1.5*m.unit()
		switch {
		case i%25 == 7:
			d, mid = 2, 1500+1000*m.unit()
		case i%5 == 3:
			d, mid = 3, 90+90*m.unit()
		}
		m.digits[s] = d
		m.mid = append(m.mid, mid)
		m.step = append(m.step, 1/math.Pow10(d)) // a point
		m.Slots = append(m.Slots, nil)
	}
	m.Move(time.Now())
	return m
}

// Digits is the instruments' digits, as cmd/web passes them to the publisher.
func (m *BenchMarket) Digits(symbol string) int {
	if d, ok := m.digits[symbol]; ok {
		return d
	}
	return -1
}

// Move gives every quote a new price (a random walk of a few points, a spread of a few points)
// and a receivedAt before now.
func (m *BenchMarket) Move(now time.Time) {
	for i := range m.Slots {
		m.mid[i] += float64(int(m.next()%21)-10) * m.step[i]
		spread := float64(1+m.next()%20) * m.step[i]
		var age time.Duration
		switch r := m.next() % 100; {
		case r < 90:
			age = time.Duration(m.next() % uint64(3*time.Second))
		case r < 99:
			age = time.Duration(m.next() % uint64(time.Minute))
		default:
			age = time.Duration(m.next() % uint64(10*time.Minute))
		}
		m.Slots[i] = &tick.Quote{Bid: m.mid[i], Ask: m.mid[i] + spread, ReceivedAt: now.Add(-age), ProviderTime: now.Add(-age)}
	}
}

func (m *BenchMarket) next() uint64 {
	m.r ^= m.r << 13
	m.r ^= m.r >> 7
	m.r ^= m.r << 17
	return m.r
}

func (m *BenchMarket) unit() float64 { return float64(m.next()>>11) / (1 << 53) }
