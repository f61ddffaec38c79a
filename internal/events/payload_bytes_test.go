package events

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// Every type's payload is stored as encoding/json's bytes of what its writer built — compact, in
// the struct's field order, whatever the server — the ids a batch learns as it runs (FromSession)
// included, in their fields' places. Those are the bytes the page, the streams and webhooks serve.
func TestStoredPayloadIsTheGoEncodingForEveryType(t *testing.T) {
	ctx := context.Background()
	const orderID, positionID = 41, 42
	at := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	nonce, sl, reason := "n-1", "1.095", "SL"
	order := Order{AccountID: 7, Symbol: "EURUSD", Side: "BUY", Type: "MARKET", Volume: "0.1", SL: &sl, TimeInForce: "GTC",
		Status: "FILLED", RequestNonce: &nonce, CreatedAt: at}
	position := Position{AccountID: 7, Symbol: "EURUSD", Side: "BUY", Volume: "0.1", InitialVolume: "0.1", OpenPrice: "1.1002",
		SL: &sl, Commission: "0.70", RealizedProfit: "0.00", Status: "OPEN", OpenedAt: at, Execution: "INTERNAL"}
	closed := Closed{Position: position, ClosedVolume: "0.1", Price: "1.08", Profit: "-20.20", Reason: reason}
	closed.CloseReason = &reason
	withIDs := func(o Order) Order { o.ID, o.PositionID = orderID, new(int64); *o.PositionID = positionID; return o }
	posWithIDs := position
	posWithIDs.ID, posWithIDs.OrderID = positionID, orderID
	fillFields := []SessionField{{"id", "@fx_t_o"}, {"positionId", "@fx_t_p"}}
	for _, tc := range []struct {
		ty      Type
		written any // as its writer hands it to Add
		fields  []SessionField
		want    any // the payload as stored, ids in place
	}{
		{OrderAccepted, order, []SessionField{{"id", "@fx_t_o"}}, func() Order { o := order; o.ID = orderID; return o }()},
		{OrderFilled, func() Order { o := order; o.PositionID = new(int64); return o }(), fillFields, withIDs(order)},
		{OrderTriggered, func() Order { o := order; o.PositionID = new(int64); return o }(), fillFields, withIDs(order)},
		{PositionOpened, position, []SessionField{{"id", "@fx_t_p"}, {"orderId", "@fx_t_o"}}, posWithIDs},
		{PositionClosed, closed, nil, closed},
		{PositionPartlyClosed, closed, nil, closed},
		{Deposit, Balance{AccountID: 7, Amount: "10000.00", BalanceAfter: "10000.00", Currency: "USD", Comment: "a <deposit> & more"}, nil,
			Balance{AccountID: 7, Amount: "10000.00", BalanceAfter: "10000.00", Currency: "USD", Comment: "a <deposit> & more"}},
	} {
		checkStored(ctx, t, tc.ty, tc.written, tc.fields, tc.want)
	}
	for _, ty := range Types {
		switch ty {
		case OrderAccepted, OrderFilled, OrderTriggered, PositionOpened, PositionClosed, PositionPartlyClosed, Deposit:
			continue
		}
		checkStored(ctx, t, ty, payloads[ty], nil, payloads[ty])
	}
}

// checkStored records one event of type ty in a transaction whose session holds the test's ids,
// and fails unless the stored payload's bytes are json.Marshal(want).
func checkStored(ctx context.Context, t *testing.T, ty Type, written any, fields []SessionField, want any) {
	t.Helper()
	tx, err := testDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET @fx_t_o = 41, @fx_t_p = 42"); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, tx, Event{AccountID: 7, UserID: 8, Type: ty, Payload: written, FromSession: fields}); err != nil {
		t.Fatalf("%s: %v", ty, err)
	}
	var stored string
	if err := tx.QueryRowContext(ctx, "SELECT `payload` FROM `fx_event` WHERE `id` = LAST_INSERT_ID()").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	wantBytes, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if stored != string(wantBytes) {
		t.Errorf("%s: stored %s\n\twant %s", ty, stored, wantBytes)
	}
}
