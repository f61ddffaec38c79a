-- Back to two places. A three-place amount (a KWD account's) is rounded by the server: run this
-- only on a desk that never opened a three-place account, or its ledger no longer sums.
ALTER TABLE `fx_swap_charge`
  MODIFY COLUMN `amount` DECIMAL(20,2) NULL;
ALTER TABLE `fx_deal`
  MODIFY COLUMN `amount`       DECIMAL(20,2) NOT NULL,
  MODIFY COLUMN `balanceAfter` DECIMAL(20,2) NOT NULL;
ALTER TABLE `fx_position`
  MODIFY COLUMN `commission`     DECIMAL(20,2) NOT NULL DEFAULT 0,
  MODIFY COLUMN `realizedProfit` DECIMAL(20,2) NOT NULL DEFAULT 0,
  MODIFY COLUMN `swap`           DECIMAL(20,2) NOT NULL DEFAULT 0;
ALTER TABLE `fx_account`
  MODIFY COLUMN `balance`    DECIMAL(20,2) NOT NULL DEFAULT 0,
  MODIFY COLUMN `equity`     DECIMAL(20,2) NOT NULL DEFAULT 0,
  MODIFY COLUMN `usedMargin` DECIMAL(20,2) NOT NULL DEFAULT 0;
