ALTER TABLE `fx_position` DROP KEY `idx_fx_position_open_account`;
DROP TABLE IF EXISTS `fx_ledger_checkpoint`;
