package audit

import (
	"context"
	"testing"
	"time"
)

// Settled is the highest id among the rows at least age old, whatever the order of the ids'
// times (an id is taken at INSERT: a row can be dated before a lower one), and 0 when no row is
// that old.
func TestSettledIsTheNewestRowOldEnough(t *testing.T) {
	t.Parallel()
	db, ids := loggedSettings(t, "audit_settled", 6)
	settled := func(age time.Duration) int64 {
		t.Helper()
		id, err := Settled(context.Background(), db, age)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	if got := settled(time.Minute); got != 0 {
		t.Fatalf("a log written just now settled %d at a minute, want 0", got)
	}
	// Rows 0, 1 and 3 are an hour old; row 2, between them, is recent; 4 and 5 are recent.
	for _, i := range []int{0, 1, 3} {
		if _, err := db.Exec("UPDATE `fx_audit` SET `at` = NOW(3) - INTERVAL 1 HOUR WHERE `id` = ?", ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if got := settled(10 * time.Minute); got != ids[3] {
		t.Fatalf("settled %d at 10 minutes, want %d (the newest of the hour-old rows)", got, ids[3])
	}
	if got := settled(2 * time.Hour); got != 0 {
		t.Fatalf("settled %d at two hours, want 0", got)
	}
	if got := settled(-time.Hour); got != ids[5] {
		t.Fatalf("settled %d at any age, want the newest row %d", got, ids[5])
	}
}
