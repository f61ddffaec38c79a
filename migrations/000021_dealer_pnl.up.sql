-- The dealer's P&L (docs/pnl.md). The spread markup a fill carries is recorded with the fill,
-- in the account's currency, as the fill computed it: `fx_position`.`markup` for the opening
-- fill, `fx_deal`.`markup` on a close's PROFIT deal for the closing fill. Markup terms change
-- (groups, overrides), so it cannot be worked out afterwards; NULL on rows written before this
-- migration (the P&L counts them as unknown, not as zero).
--
-- The P&L reads a time range of the ledger and of the openings: each gets an index on its time,
-- so a report costs the rows of its range, not the table. Adding an index is an in-place change
-- on MySQL 8 and MariaDB alike; adding a NULL column is instant on both.
ALTER TABLE `fx_deal`
  ADD COLUMN `markup` DECIMAL(21,3) NULL AFTER `price`,
  ADD KEY `idx_fx_deal_created` (`createdAt`);

ALTER TABLE `fx_position`
  ADD COLUMN `markup` DECIMAL(21,3) NULL AFTER `commission`,
  ADD KEY `idx_fx_position_opened` (`openedAt`);
