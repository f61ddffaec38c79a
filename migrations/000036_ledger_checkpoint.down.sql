DROP TABLE IF EXISTS `fx_ledger_checkpoint`;
