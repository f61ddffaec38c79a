ALTER TABLE `fx_position` DROP KEY `idx_fx_position_account_closed`;
