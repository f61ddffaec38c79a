DROP TABLE IF EXISTS `fx_deal_venue_fill`;
