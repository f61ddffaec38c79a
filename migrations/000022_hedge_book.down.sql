ALTER TABLE `fx_position` DROP KEY `idx_fx_position_hedge`, DROP COLUMN `hedgePercent`;
ALTER TABLE `fx_order` DROP COLUMN `hedgePercent`;
DELETE FROM `fx_routing_rule` WHERE `action` = 'HEDGE';
ALTER TABLE `fx_routing_rule`
  DROP COLUMN `hedgePercent`,
  MODIFY COLUMN `action` ENUM('B_BOOK','A_BOOK') NOT NULL;
DROP TABLE `fx_hedge_position`;
DROP TABLE `fx_hedge_order`;
