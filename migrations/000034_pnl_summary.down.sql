ALTER TABLE `fx_position`
  DROP KEY `idx_fx_position_symbol`,
  ADD KEY `idx_fx_position_symbol` (`status`, `symbol`);
DROP TABLE IF EXISTS `fx_pnl_summary`;
DROP TABLE IF EXISTS `fx_pnl_series`;
DROP TABLE IF EXISTS `fx_pnl_day`;
DROP TABLE IF EXISTS `fx_pnl_hour`;
