-- The events outbox's ids in commit order. An AUTO_INCREMENT id is taken at INSERT and lost on
-- rollback, so ids committed out of order and left gaps a reader had to wait out. Instead every
-- event-writing transaction, as its last statements before COMMIT, bumps the one row of
-- `fx_event_seq` and writes its event with the new value: the row lock it takes is held until
-- COMMIT, so the next writer reads the value only after this one committed, and a rollback gives
-- the value back. Ids are dense and increase in commit order (docs/architecture.md, «Events»).
-- Only internal/events writes either table.
CREATE TABLE IF NOT EXISTS `fx_event_seq` (
  `one` TINYINT NOT NULL,
  `last` BIGINT UNSIGNED NOT NULL,
  PRIMARY KEY (`one`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT IGNORE INTO `fx_event_seq` (`one`, `last`) SELECT 1, COALESCE(MAX(`id`), 0) FROM `fx_event`;
ALTER TABLE `fx_event` MODIFY `id` BIGINT UNSIGNED NOT NULL;
