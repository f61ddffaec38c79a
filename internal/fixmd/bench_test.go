package fixmd_test

import (
	"slices"
	"testing"
	"time"

	"fxdesk/internal/fixmd"
)

// BenchmarkFeedToOffer measures how far the FIX market data trails the feed: from a price change
// at the bundled venue's feed to its offer by the source (the venue's poll, an incremental over
// loopback, the source's parse and hand-off). ns/op is the mean; p50 and p95 are reported.
func BenchmarkFeedToOffer(b *testing.B) {
	r := newRig(b)
	if _, err := r.feed.SetQuote("EURUSD", 1.10000, 1.10010); err != nil {
		b.Fatal(err)
	}
	src, err := fixmd.New(r.cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	feed := newTestFeed("EURUSD")
	run(b, src, feed)
	feed.awaitOffer(b, "of the snapshot", quoteIs("EURUSD", 1.10000, 1.10010))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		px := 1.10000 + float64(i%50+1)*0.00001
		at := time.Now()
		if _, err := r.feed.SetQuote("EURUSD", px, px+0.0001); err != nil {
			b.Fatal(err)
		}
		for o := range feed.offers {
			if o.bid == px {
				break
			}
		}
		lat = append(lat, time.Since(at))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
