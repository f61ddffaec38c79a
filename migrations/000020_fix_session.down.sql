DROP TABLE `fx_fix_allocation`;
DROP TABLE `fx_fix_execution`;
DROP TABLE `fx_fix_order`;
DROP TABLE `fx_fix_messages`;
DROP TABLE `fx_fix_sessions`;
