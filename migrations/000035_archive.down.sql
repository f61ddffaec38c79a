DROP TABLE IF EXISTS `fx_candle_archive`;
DROP TABLE IF EXISTS `fx_audit_archive`;
