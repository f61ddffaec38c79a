-- The dealer's controls on account groups and accounts. A group sets whether its new accounts
-- are swap-free, whether negative balance protection applies (a close that leaves an account
-- below zero is followed by one ADJUSTMENT deal back to exactly zero; on by default), and its
-- own cap on resting orders per account (NULL: the desk setting fxMaxPendingOrdersPerAccount).
-- An account has a state an admin sets with a reason: ACTIVE, CLOSE_ONLY (no new exposure) or
-- DISABLED (read-only).
ALTER TABLE `fx_account_group`
  ADD COLUMN `swapFreeDefault` BOOL NOT NULL DEFAULT FALSE,
  ADD COLUMN `negativeBalanceProtection` BOOL NOT NULL DEFAULT TRUE,
  ADD COLUMN `maxPendingOrders` INT NULL;

ALTER TABLE `fx_account`
  ADD COLUMN `state` ENUM('ACTIVE','CLOSE_ONLY','DISABLED') NOT NULL DEFAULT 'ACTIVE',
  ADD COLUMN `stateReason` VARCHAR(255) NULL;
