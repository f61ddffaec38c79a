DROP TABLE IF EXISTS `fx_eod_day`;
DROP TABLE IF EXISTS `fx_eod_symbol`;
DROP TABLE IF EXISTS `fx_eod_account`;
DROP TABLE IF EXISTS `fx_eod_price`;
