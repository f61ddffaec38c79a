-- A-book execution (DESIGN §8). An account group's `executionMode` routes its orders: INTERNAL
-- (B-book, the desk is the counterparty) or EXTERNAL (straight through to the venue, which fills
-- first; the desk books the venue's price plus the group's markup).
ALTER TABLE `fx_account_group`
  ADD COLUMN `executionMode` ENUM('INTERNAL','EXTERNAL') NOT NULL DEFAULT 'INTERNAL' AFTER `stopOutLevel`;

-- Identity before action: an EXTERNAL order is written SENDING before its request leaves, and
-- its client id at the venue is the order's id. A request whose outcome is unknown stays SENDING
-- until the reconciler finds it at the venue (FILLED, REJECTED) or finds no trace of it past a
-- threshold (NOT_SENT). It is never sent twice. `venueOrderId` is the venue's own order id,
-- `venueReason` the venue's cancel reason or the reconciler's finding.
ALTER TABLE `fx_order`
  MODIFY COLUMN `status` ENUM('PENDING','FILLED','CANCELLED','EXPIRED','REJECTED','SENDING','NOT_SENT') NOT NULL,
  ADD COLUMN `execution` ENUM('INTERNAL','EXTERNAL') NOT NULL DEFAULT 'INTERNAL' AFTER `status`,
  ADD COLUMN `sentAt` DATETIME(3) NULL AFTER `execution`,
  ADD COLUMN `venueOrderId` VARCHAR(32) NULL AFTER `sentAt`,
  ADD COLUMN `venueReason` VARCHAR(64) NULL AFTER `venueOrderId`;

-- The link of an EXTERNAL position to its venue trade; NULL on INTERNAL positions. One live link
-- per venue trade: `liveVenueTradeId` is the trade id while the position is OPEN and NULL once
-- it is closed (NULLs do not collide), so its unique key refuses a second open position for one
-- trade — a stale adoption written by a process that lost its term is refused by the key as
-- well as by the fence — while closed links never block a trade id a venue hands out again (a
-- new venue account, a restarted simulator). A partial unique index, in the two dialects.
ALTER TABLE `fx_position`
  ADD COLUMN `venueTradeId` VARCHAR(32) NULL AFTER `orderId`,
  ADD COLUMN `liveVenueTradeId` VARCHAR(32) AS (CASE WHEN `status` = 'OPEN' THEN `venueTradeId` END) STORED,
  ADD UNIQUE KEY `uq_fx_position_venue_trade` (`liveVenueTradeId`),
  ADD KEY `idx_fx_position_venue_trade` (`venueTradeId`);

-- The venue fill an EXTERNAL close's deal books. One deal per fill and position: a fill the desk
-- booked is never booked again, and the reconciler books a fill nobody booked (a venue stop-out,
-- a close whose answer was lost) at that fill's own price. The key also serves the lookup of a
-- position's booked fills (positionId first).
ALTER TABLE `fx_deal`
  ADD COLUMN `venueTransactionId` BIGINT NULL AFTER `comment`,
  ADD UNIQUE KEY `uq_fx_deal_venue_fill` (`positionId`, `venueTransactionId`);

-- The last venue transaction whose effect the desk stored, per venue account, written in the
-- transaction of that effect; a venue snapshot older than it is ignored.
CREATE TABLE IF NOT EXISTS `fx_venue_cursor` (
  `venueAccount`      VARCHAR(64) NOT NULL,
  `lastTransactionId` BIGINT      NOT NULL DEFAULT 0,
  `updatedAt`         DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`venueAccount`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
