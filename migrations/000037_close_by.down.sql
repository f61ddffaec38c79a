DROP TABLE IF EXISTS `fx_close_by`;
