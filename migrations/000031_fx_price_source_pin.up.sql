-- A dealer's pin or halt of one symbol's price source (docs/operations.md, «Price sources»):
-- source names the one source the symbol quotes from ('' = not pinned), halted stops its quoting.
-- A row exists only while one of them is set. The holder applies every row to its tick engine
-- when it starts, so a pin outlives the process that took it; each change is audited
-- (price_source_pin.update) in the transaction that writes the row.
CREATE TABLE IF NOT EXISTS `fx_price_source_pin` (
  `symbol`    VARCHAR(32) NOT NULL,
  `source`    VARCHAR(32) NOT NULL DEFAULT '',
  `halted`    TINYINT(1)  NOT NULL DEFAULT 0,
  `updatedAt` DATETIME(3) NOT NULL,
  `updatedBy` VARCHAR(64) NOT NULL,
  PRIMARY KEY (`symbol`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
