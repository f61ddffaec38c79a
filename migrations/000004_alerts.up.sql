-- The execution alert inbox (DESIGN §6, §9): what the desk tells an operator it cannot fix itself.
--
-- An alert is deduplicated while it is not resolved: one OPEN or ACKNOWLEDGED row per code, its
-- `count` and `lastSeenAt` bumped on every repeat. The rule is enforced by the UNIQUE index on
-- `openKey`, which holds the code while the row is unresolved and NULL once it is resolved (a
-- UNIQUE index admits any number of NULLs on MySQL 8 and MariaDB alike), so a raise is one
-- INSERT … ON DUPLICATE KEY UPDATE and two processes raising at once still make one row.
-- `details` is JSON text rather than a JSON column so that MySQL 8 and MariaDB return it byte
-- for byte. Times are UTC (UTC_TIMESTAMP(3)).
CREATE TABLE IF NOT EXISTS `fx_execution_alert` (
  `id`             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `code`           VARCHAR(64)     NOT NULL,
  `severity`       ENUM('info','warning','critical') NOT NULL,
  `message`        TEXT            NOT NULL,
  `details`        TEXT            NOT NULL,
  `status`         ENUM('OPEN','ACKNOWLEDGED','RESOLVED') NOT NULL DEFAULT 'OPEN',
  `openKey`        VARCHAR(64)     NULL,
  `firstSeenAt`    DATETIME(3)     NOT NULL,
  `lastSeenAt`     DATETIME(3)     NOT NULL,
  `count`          BIGINT UNSIGNED NOT NULL DEFAULT 1,
  `acknowledgedAt` DATETIME(3)     NULL,
  `acknowledgedBy` VARCHAR(128)    NULL,
  `resolvedAt`     DATETIME(3)     NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_execution_alert_open` (`openKey`),
  KEY `idx_fx_execution_alert_status` (`status`, `lastSeenAt`),
  KEY `idx_fx_execution_alert_code` (`code`, `lastSeenAt`),
  CONSTRAINT `chk_fx_execution_alert_open` CHECK ((`status` = 'RESOLVED') = (`openKey` IS NULL))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
