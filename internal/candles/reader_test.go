package candles

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Range returns the candles that opened in [from, to), oldest first; Latest the newest count
// before a time, oldest first; a minute with no tick has no candle.
func TestReaderRangesAndPages(t *testing.T) {
	t.Parallel()
	w, err := NewWriter(WriterConfig{DB: testDB, Prices: newFeed(), Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 13, 9, 0, 0, 0, time.UTC)
	for _, m := range []int{0, 1, 2, 5, 6} { // minutes 3 and 4 have no tick
		w.b.Add("READER", 1+float64(m)/100, 1.01+float64(m)/100, at.Add(time.Duration(m)*time.Minute+time.Second))
	}
	if _, _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(testDB)
	if err != nil {
		t.Fatal(err)
	}
	opens := func(cs []Candle) (out []int) {
		for _, c := range cs {
			out = append(out, int(c.OpenTime.Sub(at)/time.Minute))
		}
		return out
	}
	ctx := context.Background()
	got, err := r.Range(ctx, "READER", M1, at.Add(time.Minute), at.Add(6*time.Minute))
	if err != nil || !slices.Equal(opens(got), []int{1, 2, 5}) || got[0].Bid.Open != 1.01 {
		t.Fatalf("range [1, 6): %v %+v %v", opens(got), got, err)
	}
	if got, err = r.Latest(ctx, "READER", M1, time.Time{}, 2); err != nil || !slices.Equal(opens(got), []int{5, 6}) {
		t.Fatalf("latest 2: %v %v", opens(got), err)
	}
	if got, err = r.Latest(ctx, "READER", M1, at.Add(5*time.Minute), 2); err != nil || !slices.Equal(opens(got), []int{1, 2}) {
		t.Fatalf("latest 2 before minute 5: %v %v", opens(got), err)
	}
	if _, err = r.Range(ctx, "READER", M1, at, at.Add(MaxSpan(M1)+time.Millisecond)); err == nil {
		t.Fatal("a range wider than MaxSpan was served")
	}
}
