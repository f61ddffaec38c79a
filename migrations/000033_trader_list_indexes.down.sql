ALTER TABLE `fx_order` DROP KEY `idx_fx_order_account_id`, DROP KEY `idx_fx_order_account_list`;
ALTER TABLE `fx_position` DROP KEY `idx_fx_position_account_id`, DROP KEY `idx_fx_position_account_list`;
