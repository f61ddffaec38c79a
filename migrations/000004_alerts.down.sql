DROP TABLE IF EXISTS `fx_execution_alert`;
