ALTER TABLE `fx_account`
  DROP COLUMN `stateReason`,
  DROP COLUMN `state`;

ALTER TABLE `fx_account_group`
  DROP COLUMN `maxPendingOrders`,
  DROP COLUMN `negativeBalanceProtection`,
  DROP COLUMN `swapFreeDefault`;
