-- Archive tables (docs/operations.md, «Retention»). Rows past their retention are moved here
-- by the holder's retention runner, a batch at a time, in one transaction per batch (INSERT …
-- SELECT, then a DELETE of exactly the rows the archive now holds), so nothing is ever deleted
-- unarchived. Tables, not partitions: a partitioned table needs every unique key to include the
-- partitioning column, and rotating a table needs no ALTER on the live one. An operator moves
-- an archive to cold storage by rotating it, atomically on both servers:
--   CREATE TABLE `fx_audit_archive_next` LIKE `fx_audit_archive`;
--   RENAME TABLE `fx_audit_archive` TO `fx_audit_archive_2025`, `fx_audit_archive_next` TO `fx_audit_archive`;
-- then dumps `fx_audit_archive_2025` (mysqldump) and drops it: no long DELETE anywhere.
--
-- fx_audit_archive: the audit log's rows, column for column (000012), plus when they moved.
CREATE TABLE IF NOT EXISTS `fx_audit_archive` (
  `id` BIGINT UNSIGNED NOT NULL,
  `at` DATETIME(3) NOT NULL,
  `actorTokenId` BIGINT NULL,
  `actorUserId` BIGINT NULL,
  `actorVia` VARCHAR(16) NOT NULL,
  `action` VARCHAR(64) NOT NULL,
  `entityType` VARCHAR(32) NOT NULL,
  `entityId` VARCHAR(64) NOT NULL,
  `before` LONGTEXT NULL,
  `after` LONGTEXT NULL,
  `requestId` VARCHAR(64) NULL,
  `archivedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_audit_archive_at` (`at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- fx_candle_archive: candles past their granularity's retention (000030), with when they moved.
CREATE TABLE IF NOT EXISTS `fx_candle_archive` (
  `symbol`      VARCHAR(12)                  NOT NULL,
  `granularity` ENUM('M1', 'M5', 'H1', 'D1') NOT NULL,
  `openTime`    DATETIME(3)                  NOT NULL,
  `bidOpen`     DECIMAL(20,10)               NOT NULL,
  `bidHigh`     DECIMAL(20,10)               NOT NULL,
  `bidLow`      DECIMAL(20,10)               NOT NULL,
  `bidClose`    DECIMAL(20,10)               NOT NULL,
  `askOpen`     DECIMAL(20,10)               NOT NULL,
  `askHigh`     DECIMAL(20,10)               NOT NULL,
  `askLow`      DECIMAL(20,10)               NOT NULL,
  `askClose`    DECIMAL(20,10)               NOT NULL,
  `ticks`       INT UNSIGNED                 NOT NULL,
  `archivedAt`  DATETIME(3)                  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`symbol`, `granularity`, `openTime`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
