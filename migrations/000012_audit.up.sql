-- The dealer's audit log: every admin write, recorded in the transaction of the change it
-- describes — who (the token and its user, or the command line), what (an action on one
-- entity), the entity before and after (JSON text), the request it came with, when. Rows are
-- only ever inserted: no route updates or deletes them (internal/audit keeps it so, and a test
-- fails on any other writer). `before`/`after` are LONGTEXT holding JSON, which MySQL 8 and
-- MariaDB store alike.
CREATE TABLE `fx_audit` (
  `id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `at` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `actorTokenId` BIGINT NULL,
  `actorUserId` BIGINT NULL,
  `actorVia` VARCHAR(16) NOT NULL,
  `action` VARCHAR(64) NOT NULL,
  `entityType` VARCHAR(32) NOT NULL,
  `entityId` VARCHAR(64) NOT NULL,
  `before` LONGTEXT NULL,
  `after` LONGTEXT NULL,
  `requestId` VARCHAR(64) NULL,
  PRIMARY KEY (`id`),
  KEY `idx_fx_audit_entity` (`entityType`, `entityId`, `id`),
  KEY `idx_fx_audit_actor` (`actorUserId`, `id`),
  KEY `idx_fx_audit_at` (`at`, `id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
