package soak

import "testing"

// The mode traders come after the load's own, one in six (at least one) per mode, and the
// load's traders keep their places (and so their streams).
func TestModeTradersFollowTheLoadsOwn(t *testing.T) {
	for _, tc := range []struct {
		n, m int
		want []string
	}{
		{4, 1, []string{"", "", "", "", groupNetting, groupFIFO}},
		{12, 2, []string{"", "", "", "", "", "", "", "", "", "", "", "", groupNetting, groupNetting, groupFIFO, groupFIFO}},
	} {
		if m := modeTraders(tc.n); m != tc.m {
			t.Fatalf("modeTraders(%d) = %d, want %d", tc.n, m, tc.m)
		}
		for i, want := range tc.want {
			if got := modeGroupOf(i, tc.n, tc.m); got != want {
				t.Errorf("%d traders: trader %d in %q, want %q", tc.n, i, got, want)
			}
		}
	}
}
