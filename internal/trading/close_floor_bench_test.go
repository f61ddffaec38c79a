package trading

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"fxdesk/internal/book"
	"fxdesk/internal/lease"
	"fxdesk/internal/testkit/dbtest"
)

// BenchmarkCloseFloor measures what a close's statements cost MariaDB on this machine, without
// the service around them: the same SQL as ClosePosition sends, raw, from 16 connections, each
// close one transaction, 2,500 closes per variant over 20,000 open positions on 1,000 accounts.
//
//	writes     START TRANSACTION | position UPDATE, balance UPDATE, deal INSERT, COMMIT
//	locks      + the account lock (through the position) and the position lock, in the first round trip
//	close      + the lease fence and the deal id read: what ClosePosition sends
//	procedure  the close's statements (fence, both locks, the writes, the deal id) in one stored
//	           procedure call — a shape the service does not use; measured to size that option
//
// It reports closes/s and the processor time per close in mariadbd and in this process. The
// writes variant is the floor of a close committed in its own transaction with its statements
// sent from the client: no read, no fence.
//
//	FXDESK_BENCH=1 go test -run '^$' -bench BenchmarkCloseFloor -benchtime 1x ./internal/trading/
func BenchmarkCloseFloor(b *testing.B) {
	dbtest.SkipUnlessBench(b, "close-floor")
	ctx := context.Background()
	db, drop, err := dbtest.NewMigrated("closefloor")
	if err != nil {
		b.Fatal(err)
	}
	defer drop()
	exec := func(q string, args ...any) {
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			b.Fatalf("%.60s: %v", q, err)
		}
	}
	exec("INSERT INTO `engine_lease` (`id`, `instanceId`, `hostname`, `pid`, `term`, `acquiredAt`, `expiresAt`, `updatedAt`) " +
		"VALUES ('forex-trading', 'bench', 'bench', 1, 1, NOW(3), NOW(3) + INTERVAL 1 HOUR, NOW(3))")
	const accounts, positions, per, workers = 1000, 20000, 2500, 16
	var sb strings.Builder
	for a := 1; a <= accounts; a++ {
		fmt.Fprintf(&sb, "(%d, 1, 'USD', 100, 1000000),", a)
	}
	exec("INSERT INTO `fx_account` (`id`, `userId`, `currency`, `leverage`, `balance`) VALUES " + strings.TrimSuffix(sb.String(), ","))
	for i := 1; i <= positions; i += 2000 {
		sb.Reset()
		for p := i; p < i+2000; p++ {
			fmt.Fprintf(&sb, "(%d, %d, %d, 'EURUSD', 'BUY', 1, 1, 1.1, 0),", p, p%accounts+1, p)
		}
		exec("INSERT INTO `fx_position` (`id`, `accountId`, `orderId`, `symbol`, `side`, `volume`, `openVolume`, `openPrice`, `commission`) VALUES " +
			strings.TrimSuffix(sb.String(), ","))
	}

	// The procedure variant's routine: the close as ClosePosition sends it, with the profit
	// (computed in Go from the locked row) passed in.
	exec(`CREATE PROCEDURE fx_close_exp(IN pid BIGINT, IN px DECIMAL(20,10), IN profit DECIMAL(20,2))
BEGIN
  DECLARE ok INT DEFAULT 0;
  DECLARE acct BIGINT;
  DECLARE bal DECIMAL(20,2);
  DECLARE st VARCHAR(10);
  DECLARE vol DECIMAL(12,4);
  DECLARE op DECIMAL(20,10);
  START TRANSACTION;
  SELECT COUNT(*) INTO ok FROM engine_lease WHERE id = 'forex-trading' AND instanceId = 'bench' AND term = 1 AND expiresAt > NOW(3) LOCK IN SHARE MODE;
  SELECT accountId INTO acct FROM fx_position WHERE id = pid;
  SELECT balance INTO bal FROM fx_account WHERE id = acct FOR UPDATE;
  SELECT status, volume, openPrice INTO st, vol, op FROM fx_position WHERE id = pid FOR UPDATE;
  UPDATE fx_position SET volume = 0, realizedProfit = profit, closePrice = px, status = 'CLOSED', closeReason = 'SL', closedAt = NOW(3) WHERE id = pid;
  UPDATE fx_account SET balance = bal + profit WHERE id = acct;
  INSERT INTO fx_deal (accountId, type, amount, balanceAfter, currency, orderId, positionId, symbol, side, volume, price, idempotencyKey, comment)
    VALUES (acct, 'PROFIT', profit, bal + profit, 'USD', pid, pid, 'EURUSD', 'BUY', vol, px, CONCAT('close:', pid), 'close sl');
  SELECT LAST_INSERT_ID(), bal + profit, ok;
  COMMIT;
END`)
	const writes = "UPDATE `fx_position` SET `volume` = 0, `realizedProfit` = -1, `closePrice` = 1.09, `status` = 'CLOSED', `closeReason` = 'SL', " +
		"`closedAt` = NOW(3) WHERE `id` = %[1]d;\n" +
		"UPDATE `fx_account` SET `balance` = `balance` - 1 WHERE `id` = %[2]d;\n" +
		"INSERT INTO `fx_deal` (`accountId`, `type`, `amount`, `balanceAfter`, `currency`, `orderId`, `positionId`, " +
		"`symbol`, `side`, `volume`, `price`, `idempotencyKey`, `comment`) VALUES " +
		"(%[2]d, 'PROFIT', -1, 5, 'USD', %[1]d, %[1]d, 'EURUSD', 'BUY', 1, 1.09, 'close:%[1]d', 'close sl');\n"
	const locks = "SELECT " + book.AccountCols + " FROM `fx_account` WHERE `id` = (SELECT `accountId` FROM `fx_position` WHERE `id` = %[1]d) FOR UPDATE;\n" +
		"SELECT " + book.PositionCols + " FROM `fx_position` p WHERE p.`id` = %[1]d FOR UPDATE"
	fence := lease.FenceSQL
	for _, v := range []string{"'" + lease.Key + "'", "'bench'", "1"} {
		fence = strings.Replace(fence, "?", v, 1)
	}
	variants := []struct {
		name  string
		trips []string // one batch per round trip
	}{
		{"writes", []string{"START TRANSACTION", writes + "COMMIT"}},
		{"locks", []string{"START TRANSACTION;\n" + locks, writes + "COMMIT"}},
		{"close", []string{"START TRANSACTION;\n" + locks, writes + "SELECT LAST_INSERT_ID();\n" + fence + ";\nCOMMIT"}},
		{"procedure", []string{"CALL fx_close_exp(%[1]d, 1.09, -1)"}},
	}
	next := 1
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			first := next
			next += per
			ids := make(chan int)
			var wg sync.WaitGroup
			var failed sync.Once
			cpu0 := dbtest.ReadCPU()
			start := time.Now()
			for range workers {
				wg.Go(func() {
					for id := range ids {
						conn, err := db.Conn(ctx)
						if err != nil {
							failed.Do(func() { b.Error(err) })
							continue
						}
						for _, trip := range v.trips {
							if strings.Contains(trip, "%[") {
								trip = fmt.Sprintf(trip, id, id%accounts+1)
							}
							rows, err := conn.QueryContext(ctx, trip)
							if err != nil {
								failed.Do(func() { b.Error(err) })
								break
							}
							for more := true; more; more = rows.NextResultSet() {
								for rows.Next() {
								}
							}
							if err := rows.Close(); err != nil {
								failed.Do(func() { b.Error(err) })
							}
						}
						conn.Close()
					}
				})
			}
			for id := first; id < first+per; id++ {
				ids <- id
			}
			close(ids)
			wg.Wait()
			elapsed := time.Since(start)
			cpu := dbtest.ReadCPU().Sub(cpu0)
			var closed int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `fx_position` WHERE `id` BETWEEN ? AND ? AND `status` = 'CLOSED'", first, first+per-1).Scan(&closed); err != nil {
				b.Fatal(err)
			}
			if closed != per {
				b.Fatalf("%d of %d positions closed", closed, per)
			}
			b.ReportMetric(per/elapsed.Seconds(), "closes/s")
			b.ReportMetric(float64(cpu.Server.Microseconds())/per, "db-cpu-µs/close")
			b.ReportMetric(float64(cpu.Self.Microseconds())/per, "self-cpu-µs/close")
		})
	}
}
