ALTER TABLE `fx_position` DROP KEY `idx_fx_position_opened`, DROP COLUMN `markup`;
ALTER TABLE `fx_deal` DROP KEY `idx_fx_deal_created`, DROP COLUMN `markup`;
