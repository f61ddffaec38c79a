DROP TABLE `fx_audit`;
