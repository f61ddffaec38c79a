DROP TABLE IF EXISTS `fx_price_source_pin`;
