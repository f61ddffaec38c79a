DROP TABLE IF EXISTS `fx_candle`;
