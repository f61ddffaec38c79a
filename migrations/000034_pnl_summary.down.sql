DROP TABLE IF EXISTS `fx_pnl_summary`;
DROP TABLE IF EXISTS `fx_pnl_series`;
DROP TABLE IF EXISTS `fx_pnl_day`;
DROP TABLE IF EXISTS `fx_pnl_hour`;
