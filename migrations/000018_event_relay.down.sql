DROP TABLE IF EXISTS `fx_webhook_dead`;
DROP TABLE IF EXISTS `fx_webhook`;
DROP TABLE IF EXISTS `fx_event_relay`;
