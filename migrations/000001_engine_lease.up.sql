-- The engine lease: one row per leased key, decided by one conditional UPDATE. Times come from
-- the database clock (NOW(3)); `term` is the fencing token, +1 on every new acquisition.
CREATE TABLE IF NOT EXISTS `engine_lease` (
  `id`         VARCHAR(64)  NOT NULL,
  `instanceId` VARCHAR(64)  NOT NULL,
  `hostname`   VARCHAR(255) NOT NULL,
  `pid`        INT          NOT NULL,
  `term`       BIGINT       NOT NULL,
  `acquiredAt` DATETIME(3)  NOT NULL,
  `expiresAt`  DATETIME(3)  NOT NULL,
  `updatedAt`  DATETIME(3)  NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
