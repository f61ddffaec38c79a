ALTER TABLE `fx_position` DROP KEY `idx_fx_position_open`, DROP COLUMN `swapThrough`, DROP COLUMN `swap`;
ALTER TABLE `fx_account` DROP COLUMN `swapFree`;
DROP TABLE IF EXISTS `fx_swap_charge`;
