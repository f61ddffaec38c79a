DROP TABLE IF EXISTS `fx_venue_cursor`;
ALTER TABLE `fx_deal`
  DROP INDEX `uq_fx_deal_venue_fill`,
  DROP COLUMN `venueTransactionId`;
ALTER TABLE `fx_position`
  DROP INDEX `uq_fx_position_venue_trade`,
  DROP INDEX `idx_fx_position_venue_trade`,
  DROP COLUMN `liveVenueTradeId`,
  DROP COLUMN `venueTradeId`;
ALTER TABLE `fx_order`
  DROP COLUMN `venueReason`,
  DROP COLUMN `venueOrderId`,
  DROP COLUMN `sentAt`,
  DROP COLUMN `execution`,
  MODIFY COLUMN `status` ENUM('PENDING','FILLED','CANCELLED','EXPIRED','REJECTED') NOT NULL;
ALTER TABLE `fx_account_group`
  DROP COLUMN `executionMode`;
