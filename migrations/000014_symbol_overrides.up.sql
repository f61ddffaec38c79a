-- Per account group symbol settings: an account group's overrides of the terms its traders get,
-- either on one symbol or on every symbol of a symbol group. Exactly one of `symbol` and
-- `symbolGroup` names the target (the other is ''); a NULL term is not overridden and falls
-- through to the next level. The catalog's resolver (catalog.Catalog.Effective) reads, most
-- specific first: the override on the symbol, the override on its symbol group, the symbol
-- group (markup, commission), the instrument (swaps, leverage cap, volumes).
--
-- markupPoints: spread markup in the instrument's points, added to a buy's fill and taken off a
-- sell's. commissionPerLot (+ commissionCurrency, which needs it): charged per lot at the open.
-- swapLong/swapShort: points per lot per night, as fx_instrument's. leverageMax: the symbol's
-- leverage cap for this group (replaces the instrument's; the account's and the group's caps
-- still apply). volumeMin/volumeMax: lots per order. tradeMode: FULL, CLOSE_ONLY (no new
-- exposure) or DISABLED (no trading on the symbol).
CREATE TABLE `fx_symbol_override` (
  `accountGroup`       VARCHAR(32)   NOT NULL,
  `symbol`             VARCHAR(12)   NOT NULL DEFAULT '',
  `symbolGroup`        VARCHAR(32)   NOT NULL DEFAULT '',
  `markupPoints`       DECIMAL(12,4) NULL,
  `commissionPerLot`   DECIMAL(20,4) NULL,
  `commissionCurrency` CHAR(3)       NULL,
  `swapLong`           DECIMAL(12,4) NULL,
  `swapShort`          DECIMAL(12,4) NULL,
  `leverageMax`        INT           NULL,
  `volumeMin`          DECIMAL(12,4) NULL,
  `volumeMax`          DECIMAL(12,4) NULL,
  `tradeMode`          ENUM('FULL','CLOSE_ONLY','DISABLED') NULL,
  `createdAt`          DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`          DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`accountGroup`, `symbol`, `symbolGroup`),
  CONSTRAINT `fk_fx_symbol_override_group` FOREIGN KEY (`accountGroup`) REFERENCES `fx_account_group` (`name`) ON UPDATE CASCADE,
  CONSTRAINT `chk_fx_symbol_override_target` CHECK ((`symbol` = '') <> (`symbolGroup` = '')),
  CONSTRAINT `chk_fx_symbol_override_values` CHECK (
    (`markupPoints` IS NULL OR `markupPoints` >= 0) AND
    (`commissionPerLot` IS NULL OR `commissionPerLot` >= 0) AND
    (`leverageMax` IS NULL OR `leverageMax` >= 1) AND
    (`volumeMin` IS NULL OR `volumeMin` > 0) AND
    (`volumeMax` IS NULL OR `volumeMax` > 0) AND
    (`volumeMin` IS NULL OR `volumeMax` IS NULL OR `volumeMax` >= `volumeMin`))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
