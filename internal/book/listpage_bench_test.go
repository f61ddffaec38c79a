package book

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"fxdesk/internal/store"
)

// The trader's lists before and after the keyset pages, on a generated database (FXDESK_BENCH=1;
// FXDESK_READS_DSN names the database, FXDESK_READS_RESULT the JSON cmd/fxgen printed for it):
// p50 / p99 of each read over FXDESK_READS_N calls (default 200), for the big and the small
// trader. "before" is the statement the lists sent before the keyset pages (the join on the user; docs/architecture.md, «Reading a trader's history»), run on
// the same database. The figures go to the output and docs, never into pass or fail.
//
//	go run ./cmd/fxgen -dsn 'root@tcp(127.0.0.1:3306)/fxdesk_reads_month' -size month > month.json
//	FXDESK_BENCH=1 FXDESK_READS_DSN='root@tcp(127.0.0.1:3306)/fxdesk_reads_month' FXDESK_READS_RESULT=month.json \
//	  go test -run TestBenchTraderLists -v ./internal/book/
func TestBenchTraderLists(t *testing.T) {
	if os.Getenv("FXDESK_BENCH") != "1" || os.Getenv("FXDESK_READS_DSN") == "" {
		t.Skip("FXDESK_BENCH=1 and FXDESK_READS_DSN run the lists' benchmark")
	}
	ctx := context.Background()
	raw, err := os.ReadFile(os.Getenv("FXDESK_READS_RESULT"))
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ BigUser, SmallUser, BigAccount, SmallAccount int64 } // of yeargen.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, os.Getenv("FXDESK_READS_DSN"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 200
	fmt.Sscan(os.Getenv("FXDESK_READS_N"), &n)

	// before is the pre-keyset statement of a list: the join on the user, sorted by id.
	before := func(cols, table, alias string, status bool, account bool) string {
		q := "SELECT " + cols + " FROM " + table + " " + alias + " JOIN `fx_account` a ON a.`id` = " + alias + ".`accountId` WHERE a.`userId` = ?"
		if account {
			q += " AND " + alias + ".`accountId` = ?"
		}
		if status {
			q += " AND " + alias + ".`status` = ?"
		}
		return q + " ORDER BY " + alias + ".`id` DESC LIMIT ?"
	}
	count := func(q string, args ...any) func() (int, error) {
		return func() (int, error) {
			rows, err := db.QueryContext(ctx, q, args...)
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			k := 0
			for rows.Next() {
				k++
			}
			return k, rows.Err()
		}
	}
	type read struct {
		name          string
		before, after func(user, account int64) func() (int, error)
	}
	reads := []read{
		{"deals (first page, default 500)",
			func(u, _ int64) func() (int, error) {
				return count(before(DealCols, "`fx_deal`", "d", false, false), u, 500)
			},
			func(u, _ int64) func() (int, error) {
				return func() (int, error) { ds, err := ListDeals(ctx, db, u, ListFilter{Limit: 500}); return len(ds), err }
			}},
		{"deals limit=50",
			func(u, _ int64) func() (int, error) {
				return count(before(DealCols, "`fx_deal`", "d", false, false), u, 50)
			},
			func(u, _ int64) func() (int, error) {
				return func() (int, error) { ds, err := ListDeals(ctx, db, u, ListFilter{Limit: 50}); return len(ds), err }
			}},
		{"deals accountId=",
			func(u, a int64) func() (int, error) {
				return count(before(DealCols, "`fx_deal`", "d", false, true), u, a, 500)
			},
			func(u, a int64) func() (int, error) {
				return func() (int, error) {
					ds, err := ListDeals(ctx, db, u, ListFilter{AccountID: a, Limit: 500})
					return len(ds), err
				}
			}},
		{"positions status=closed",
			func(u, _ int64) func() (int, error) {
				return count(before(PositionCols, "`fx_position`", "p", true, false), u, "CLOSED", 500)
			},
			func(u, _ int64) func() (int, error) {
				return func() (int, error) {
					ps, err := ListPositions(ctx, db, u, ListFilter{Status: "CLOSED", Limit: 500})
					return len(ps), err
				}
			}},
		{"orders",
			func(u, _ int64) func() (int, error) {
				return count(before(OrderCols, "`fx_order`", "o", false, false), u, 500)
			},
			func(u, _ int64) func() (int, error) {
				return func() (int, error) { os, err := ListOrders(ctx, db, u, ListFilter{Limit: 500}); return len(os), err }
			}},
		{"orders status=pending",
			func(u, _ int64) func() (int, error) {
				return count(before(OrderCols, "`fx_order`", "o", true, false), u, "PENDING", 500)
			},
			func(u, _ int64) func() (int, error) {
				return func() (int, error) {
					os, err := ListOrders(ctx, db, u, ListFilter{Status: "PENDING", Limit: 500})
					return len(os), err
				}
			}},
		{"deals page 2 (limit=50, before=nextBefore)", nil,
			func(u, _ int64) func() (int, error) {
				first, err := ListDeals(ctx, db, u, ListFilter{Limit: 50})
				if err != nil || len(first) < 50 {
					return func() (int, error) { return 0, fmt.Errorf("no second page: %v", err) }
				}
				b := first[len(first)-1].ID
				return func() (int, error) {
					ds, err := ListDeals(ctx, db, u, ListFilter{Limit: 50, Before: b})
					return len(ds), err
				}
			}},
	}
	measure := func(f func() (int, error)) (p50, p99 time.Duration, rows int) {
		var took []time.Duration
		for range n {
			start := time.Now()
			k, err := f()
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(start))
			rows = k
		}
		slices.Sort(took)
		return took[len(took)/2], took[min(len(took)-1, len(took)*99/100)], rows
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	fmt.Printf("trader lists, %d calls each, p50 / p99 ms (rows): before (join on the user) → after (keyset per account)\n", n)
	for _, who := range []struct {
		name          string
		user, account int64
	}{{"big", res.BigUser, res.BigAccount}, {"small", res.SmallUser, res.SmallAccount}} {
		for _, r := range reads {
			line := fmt.Sprintf("%-5s %-44s", who.name, r.name)
			if r.before != nil {
				p50, p99, k := measure(r.before(who.user, who.account))
				line += fmt.Sprintf(" before %8s / %8s (%d)", ms(p50), ms(p99), k)
			} else {
				line += fmt.Sprintf(" %-28s", "before —")
			}
			p50, p99, k := measure(r.after(who.user, who.account))
			fmt.Println(line + fmt.Sprintf("   after %6s / %6s (%d)", ms(p50), ms(p99), k))
		}
	}
}
