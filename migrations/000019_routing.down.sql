DROP TABLE `fx_account_profile`;
ALTER TABLE `fx_order` DROP COLUMN `routeRuleId`;
DROP TABLE `fx_routing_rule`;
