package book

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"fxdesk/internal/testkit/dbtest"
)

// A trader's lists page back through every account of the user by keyset: following nextBefore
// (the last id of a full page) from the newest visits each of the user's rows once, newest
// first, for one account or all of them, with and without a status; another user's account
// lists nothing. The rows of two accounts (and a stranger's) are interleaved at random, so a
// page takes entries from several accounts' pages.
func TestListPagesKeysetAcrossAccounts(t *testing.T) {
	ctx := context.Background()
	db, closeDB, err := dbtest.NewMigrated("book_listpage")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeDB)
	const user, stranger = 41, 42
	var accounts []int64
	for _, u := range []int64{user, user, stranger} {
		res, err := db.ExecContext(ctx, "INSERT INTO `fx_account` (`userId`, `currency`, `leverage`) VALUES (?, 'USD', 100)", u)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		accounts = append(accounts, id)
	}
	rng := rand.New(rand.NewPCG(1, 42))
	type row struct {
		id, account int64
		status      string
	}
	var deals, positions, orders []row
	for i := range 90 {
		a := accounts[rng.IntN(len(accounts))]
		res, err := db.ExecContext(ctx, "INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `idempotencyKey`) VALUES (?, 'DEPOSIT', 1, 1, 'USD', ?)", a, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		deals = append(deals, row{id, a, ""})
		ost := []string{"PENDING", "FILLED", "CANCELLED"}[rng.IntN(3)]
		if res, err = db.ExecContext(ctx, "INSERT INTO `fx_order` (`accountId`, `symbol`, `side`, `type`, `volume`, `status`, `requestNonce`) VALUES (?, 'EURUSD', 'BUY', 'MARKET', 1, ?, ?)", a, ost, fmt.Sprint("n", i)); err != nil {
			t.Fatal(err)
		}
		oid, _ := res.LastInsertId()
		orders = append(orders, row{oid, a, ost})
		pst := []string{"OPEN", "CLOSED"}[rng.IntN(2)]
		if res, err = db.ExecContext(ctx, "INSERT INTO `fx_position` (`accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `status`) VALUES (?, ?, 'EURUSD', 'BUY', 1, 1, 1.1, ?)", a, oid, pst); err != nil {
			t.Fatal(err)
		}
		pid, _ := res.LastInsertId()
		positions = append(positions, row{pid, a, pst})
	}
	want := func(rows []row, f ListFilter) []int64 {
		var out []int64
		for _, r := range slices.Backward(rows) {
			if r.account == accounts[2] || (f.AccountID != 0 && r.account != f.AccountID) || (f.Status != "" && r.status != f.Status) {
				continue
			}
			out = append(out, r.id)
		}
		return out
	}
	// walk follows the pages of one list, as a client follows nextBefore.
	walk := func(list func(ListFilter) ([]int64, error), f ListFilter) []int64 {
		t.Helper()
		var all []int64
		for range 100 {
			page, err := list(f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, page...)
			if len(page) < f.Limit {
				return all
			}
			f.Before = page[len(page)-1]
		}
		t.Fatalf("%+v: no last page after 100 pages", f)
		return nil
	}
	lists := map[string]struct {
		rows     []row
		statuses []string
		list     func(ListFilter) ([]int64, error)
	}{
		"deals": {deals, []string{""}, func(f ListFilter) ([]int64, error) {
			ds, err := ListDeals(ctx, db, user, f)
			return mapIDs(ds, func(d Deal) int64 { return d.ID }), err
		}},
		"orders": {orders, []string{"", "PENDING", "FILLED"}, func(f ListFilter) ([]int64, error) {
			os, err := ListOrders(ctx, db, user, f)
			return mapIDs(os, func(o Order) int64 { return o.ID }), err
		}},
		"positions": {positions, []string{"", "OPEN", "CLOSED"}, func(f ListFilter) ([]int64, error) {
			ps, err := ListPositions(ctx, db, user, f)
			return mapIDs(ps, func(p Position) int64 { return p.ID }), err
		}},
	}
	for name, l := range lists {
		for _, status := range l.statuses {
			for _, account := range []int64{0, accounts[0], accounts[1]} {
				for _, limit := range []int{1, 7, 500} {
					f := ListFilter{AccountID: account, Status: status, Limit: limit}
					if got, want := walk(l.list, f), want(l.rows, f); !slices.Equal(got, want) {
						t.Errorf("%s %+v: pages give %v, want %v", name, f, got, want)
					}
				}
			}
			if got, err := l.list(ListFilter{AccountID: accounts[2], Status: status, Limit: 10}); err != nil || len(got) != 0 {
				t.Errorf("%s of another user's account: %v %v", name, got, err)
			}
		}
	}
}

func mapIDs[T any](xs []T, id func(T) int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}
