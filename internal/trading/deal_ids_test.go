package trading

import (
	"context"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/shopspring/decimal"

	"fxdesk/internal/fx"
	"fxdesk/internal/store"
	"fxdesk/internal/testkit/dbtest"
	"fxdesk/internal/testkit/gatetest"
)

// A batch's deals are one multi-row INSERT whose ids the desk answers without reading them back
// one by one. On a Galera node they are auto_increment_increment apart (the cluster's size), not
// consecutive: the cluster soak found closes answered with ids of deals that did not exist. Two
// closes of one batch, on sessions that step ids by 2, are answered with the ids of their own
// deals.
func TestBatchAnswersDealIDsOnAStridedAutoIncrement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var name string
	if err := testDB.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	cfg.Params["auto_increment_increment"] = "2" // set on every session, as Galera sets it on its nodes
	db, err := store.ConnectPool(cfg.FormatDSN(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := newService(t, Config{DB: db, Prices: eurusd, Lease: &switchLease{}, Gate: newGate(t, &gatetest.Lease{}).g})
	a := fundedAccount(t, svc, 9401)
	var pos [2]int64
	for i := range pos {
		res, err := svc.PlaceOrder(ctx, 9401, marketBuy(a.ID, "0.1", ""))
		if err != nil {
			t.Fatal(err)
		}
		pos[i] = res.Position.ID
	}
	inOneBatch(svc, 2)
	var res [2]CloseResult
	var errs [2]error
	concurrently(
		func() { res[0], errs[0] = svc.ClosePosition(ctx, 9401, pos[0], nil, fx.CloseClient) },
		func() { res[1], errs[1] = svc.ClosePosition(ctx, 9401, pos[1], nil, fx.CloseClient) },
	)
	if st := svc.CommitStats(); st.LastSize != 2 {
		t.Fatalf("the closes were not one batch: %+v", st)
	}
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("close %d: %v", i, errs[i])
		}
		d := res[i].Deal
		var positionID int64
		var amount decimal.Decimal
		if err := testDB.QueryRowContext(ctx, "SELECT `positionId`, `amount` FROM `fx_deal` WHERE `id` = ?", d.ID).Scan(&positionID, &amount); err != nil {
			t.Fatalf("close %d answered deal %d: %v", i, d.ID, err)
		}
		if positionID != pos[i] || !amount.Equal(d.Amount) {
			t.Fatalf("close %d of position %d answered deal %d (%s); that deal is position %d's, %s", i, pos[i], d.ID, d.Amount, positionID, amount)
		}
	}
}
