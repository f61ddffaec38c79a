-- The events outbox: one row per change a trader or the host platform is told of (an order
-- filled, a position opened or closed, a deposit), inserted in the transaction of the change
-- it describes, so a change without its event, or an event without its change, cannot be
-- committed. Rows are only ever inserted (internal/events keeps it so, and a test fails on any
-- other writer). `payload` is LONGTEXT holding JSON in the API's field names, which MySQL 8 and
-- MariaDB store alike; `term` is the engine lease term of the process that wrote it (0: none).
--
-- `id` is assigned at INSERT, not at COMMIT: two transactions can commit in the other order,
-- so a reader must not move past a gap in the ids until it has settled (docs/architecture.md,
-- «Events»).
CREATE TABLE `fx_event` (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `accountId` BIGINT NOT NULL,
  `userId` BIGINT NOT NULL,
  `type` VARCHAR(64) NOT NULL,
  `payload` LONGTEXT NOT NULL,
  `term` BIGINT NOT NULL DEFAULT 0,
  `createdAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_event_account` (`accountId`, `id`),
  KEY `idx_fx_event_user` (`userId`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
