// Package store opens the desk's MySQL/MariaDB database, creates it when missing and applies the
// embedded migrations, and is the one place that knows MySQL: the driver options the desk needs
// (DSN) and what a driver error means (IsDuplicateKey, IsDeadlock, IsLockWaitTimeout, RolledBack,
// IsFenceRefusal, Unreachable) — and RetryRolledBack, the one way a transaction the server
// rolled back (a deadlock, a lock wait timeout) is run again. SQL that belongs to one part of
// the desk lives next to that part's store; no other package reads a driver error's number.
//
// Every statement is written for MySQL 8.0+ and MariaDB 10.6+ by both manuals
// (TestSQLIsPortable parses them all with a MySQL grammar), and the tests run every session in
// MySQL 8's default sql_mode (dbtest.SQLMode), so what MySQL 8 refuses fails there too. The
// desk relies on:
//
//   - the driver options set by DSN: multiStatements (a fill or a close is a few round trips
//     of batched statements, the lease fence last before COMMIT), clientFoundRows (a conditional
//     UPDATE that matches our own unchanged row counts 1: the lease claim and renew),
//     interpolateParams and parseTime, and the session time_zone '+00:00' with loc=UTC;
//   - InnoDB at its default REPEATABLE READ, with locking reads where a decision must see the
//     latest committed row: SELECT … FOR UPDATE on accounts and positions, in id order, and
//     LOCK IN SHARE MODE on the lease row (not FOR SHARE, which MariaDB lacks);
//   - DATETIME(3) columns and the database clock NOW(3) for every lease time, never the client's;
//     every session runs in UTC (docs/architecture.md, «Beyond one machine») because DSN pins
//     time_zone, whatever the server's zone or the configured DSN says, so NOW(3) and the
//     CURRENT_TIMESTAMP(3) column defaults are UTC — the column defaults stay, rather than every
//     INSERT passing its times, because the database clock is the one clock every process shares;
//   - LAST_INSERT_ID(expr) to hand the new lease term back from the claim's UPDATE, user
//     variables (@fx_order_id) within one batch, and GET_LOCK for migrations;
//   - the lease fence (lease.FenceSQL): one SELECT whose scalar subquery returns two rows when
//     the term is not held, so the server raises 1242 (ER_SUBQUERY_NO_1_ROW) and runs nothing
//     after it in the batch, COMMIT included. No compound statements outside stored programs,
//     no SIGNAL, no RETURNING, no IF [NOT] EXISTS on indexes or columns;
//   - on a Galera node (wsrep_on, asked of every new connection with SHOW VARIABLES, so a plain
//     MySQL or MariaDB is sent nothing more), causal reads: every session sets wsrep_sync_wait
//     (GaleraSyncWait), because Galera certifies writes but not reads, and the lease fence's
//     locking read must see a claim another node committed (docs/cluster.md).
//
// docs/mysql.md says the same for operators.
package store
