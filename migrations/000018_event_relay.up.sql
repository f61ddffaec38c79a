-- The host platform's feed (internal/relay). `fx_event_relay` holds how far each consumer of the
-- events outbox got: the Redis Stream relay ('stream') and one cursor per webhook endpoint
-- ('webhook:<id>'). Only the relay on the engine lease holder moves a cursor, in a transaction
-- fenced by its lease term (`term` records which); a relay stopped between sending and writing
-- the position sends again from the stored one, so delivery is at least once, never a skip.
CREATE TABLE IF NOT EXISTS `fx_event_relay` (
  `name` VARCHAR(64) NOT NULL,
  `position` BIGINT UNSIGNED NOT NULL DEFAULT 0,
  `term` BIGINT NOT NULL DEFAULT 0,
  `updatedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO `fx_event_relay` (`name`, `position`) VALUES ('stream', 0);

-- Webhook endpoints, created and changed by the admin API (audited). `secret` signs every post
-- (HMAC-SHA256); it is shown once, at creation, and never logged.
CREATE TABLE IF NOT EXISTS `fx_webhook` (
  `id` BIGINT NOT NULL AUTO_INCREMENT,
  `url` VARCHAR(2048) NOT NULL,
  `secret` VARCHAR(128) NOT NULL,
  `enabled` TINYINT(1) NOT NULL DEFAULT 1,
  `createdAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- An event an endpoint did not accept after every attempt: the relay moved past it and left it
-- here, where the status page and the admin API show it and an admin call replays it.
CREATE TABLE IF NOT EXISTS `fx_webhook_dead` (
  `id` BIGINT NOT NULL AUTO_INCREMENT,
  `webhookId` BIGINT NOT NULL,
  `eventId` BIGINT UNSIGNED NOT NULL,
  `attempts` INT NOT NULL,
  `lastStatus` INT NULL,
  `lastError` VARCHAR(512) NOT NULL,
  `failedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `replayedAt` DATETIME(3) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_webhook_dead_event` (`webhookId`, `eventId`),
  KEY `idx_fx_webhook_dead_open` (`replayedAt`, `webhookId`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
