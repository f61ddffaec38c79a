-- Money in an account's currency carries that currency's ISO 4217 minor units (DESIGN §4): 0 for
-- JPY, 2 for USD, 3 for KWD, BHD, OMR, JOD, TND, IQD, LYD. The money columns were DECIMAL(20,2),
-- which would round a dinar amount a second time, silently, on insert; they become
-- DECIMAL(21,3), one more place and the same eighteen integer digits. Existing values are kept
-- exactly. Widening is safe to run again. Changing a DECIMAL's scale copies the table on MySQL 8
-- and MariaDB alike: on a desk with a long ledger, apply it in a quiet hour.
ALTER TABLE `fx_account`
  MODIFY COLUMN `balance`    DECIMAL(21,3) NOT NULL DEFAULT 0,
  MODIFY COLUMN `equity`     DECIMAL(21,3) NOT NULL DEFAULT 0,
  MODIFY COLUMN `usedMargin` DECIMAL(21,3) NOT NULL DEFAULT 0;
ALTER TABLE `fx_position`
  MODIFY COLUMN `commission`     DECIMAL(21,3) NOT NULL DEFAULT 0,
  MODIFY COLUMN `realizedProfit` DECIMAL(21,3) NOT NULL DEFAULT 0,
  MODIFY COLUMN `swap`           DECIMAL(21,3) NOT NULL DEFAULT 0;
ALTER TABLE `fx_deal`
  MODIFY COLUMN `amount`       DECIMAL(21,3) NOT NULL,
  MODIFY COLUMN `balanceAfter` DECIMAL(21,3) NOT NULL;
ALTER TABLE `fx_swap_charge`
  MODIFY COLUMN `amount` DECIMAL(21,3) NULL;
