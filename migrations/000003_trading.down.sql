ALTER TABLE `fx_instrument` DROP COLUMN `leverageMax`;
DROP TABLE IF EXISTS `fx_setting`;
DROP TABLE IF EXISTS `fx_api_token`;
DROP TABLE IF EXISTS `fx_deal`;
DROP TABLE IF EXISTS `fx_position`;
DROP TABLE IF EXISTS `fx_order`;
DROP TABLE IF EXISTS `fx_account`;
DROP TABLE IF EXISTS `fx_account_group`;
DROP TABLE IF EXISTS `fx_symbol_group`;
