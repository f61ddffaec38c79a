package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
)

// GaleraSyncWait is the wsrep_sync_wait every desk session runs with on a Galera node: reads
// (SELECT, SHOW, BEGIN) and UPDATE/DELETE first wait until the node has applied every
// transaction the cluster committed before they began (docs/cluster.md).
//
// Galera certifies writes, not reads: a locking read (the lease fence's LOCK IN SHARE MODE, an
// account's FOR UPDATE) takes its lock on the node that runs it and reads that node's newest
// row, which may be older than a row another node has already committed — a new holder's
// claim. Without the wait, a holder that lost the lease could pass its fence on a lagging node
// and commit beside the new holder (TestGaleraFenceSeesAClaimFromAnotherNode). With it, the
// fence and the claim read the newest lease row cluster-wide, as on one server. Writes that
// still race are refused at certification (1213): a lost claim, or a fenced batch run again on
// fresh rows (RetryRolledBack).
const GaleraSyncWait = 3

// causalConnector makes every connection of a pool ask its server whether it is a Galera node
// and, if so, set GaleraSyncWait for the session. A connection that reaches another server
// after a failover asks again; on MySQL and on MariaDB without wsrep nothing is set, so the
// statements stay those of one server.
type causalConnector struct{ driver.Connector }

func (c causalConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := causalSession(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// causalSession sets GaleraSyncWait on conn when its server has wsrep on. SHOW VARIABLES is
// asked rather than @@wsrep_on, which MySQL refuses as an unknown variable.
func causalSession(ctx context.Context, conn driver.Conn) error {
	q, ok1 := conn.(driver.QueryerContext)
	x, ok2 := conn.(driver.ExecerContext)
	if !ok1 || !ok2 {
		return errors.New("the MySQL driver's connection cannot run statements")
	}
	rows, err := q.QueryContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'", nil)
	if err != nil {
		return fmt.Errorf("ask whether the server is a Galera node: %w", err)
	}
	row := make([]driver.Value, len(rows.Columns()))
	on := false
	for {
		err := rows.Next(row)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rows.Close()
			return fmt.Errorf("ask whether the server is a Galera node: %w", err)
		}
		if len(row) == 2 {
			v, _ := row[1].([]byte)
			on = strings.EqualFold(string(v), "ON")
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("ask whether the server is a Galera node: %w", err)
	}
	if !on {
		return nil
	}
	if _, err := x.ExecContext(ctx, fmt.Sprintf("SET SESSION wsrep_sync_wait = %d", GaleraSyncWait), nil); err != nil {
		return fmt.Errorf("set causal reads on a Galera node: %w", err)
	}
	return nil
}
