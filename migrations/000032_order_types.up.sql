-- The orders traders expect (docs/orders.md): STOP_LIMIT orders, a price bound and IOC/FOK on
-- MARKET orders, OCO pairs, modify in place, trailing stops kept on the holder, and the account
-- group's position mode.
--
-- fx_order:
--   `limitPrice`   STOP_LIMIT only: the limit it rests at once its stop (`price`) triggers.
--   `triggeredAt`  STOP_LIMIT only: when its stop triggered; from then on it rests as a LIMIT at
--                  `limitPrice` (still PENDING) and `order.triggered` has been emitted once.
--   `priceBound`   MARKET only: the worst price the trader accepts (a buy fills at or below it,
--                  a sell at or above it); refused rather than filled past it.
--   `filledVolume` IOC at the venue only: the lots the venue filled when it filled part
--                  (`volume` stays what was asked); NULL when the whole order filled or none did.
--   `ocoOrderId`   the other leg of an OCO pair, set on both legs; a fill of one cancels the
--                  other in the fill's own transaction.
--   `trailDistance` a trailing stop (price units) set on the position this order opens.
--   `modifiedAt`   the last modify in place (PATCH), NULL when never modified.
ALTER TABLE `fx_order`
  MODIFY COLUMN `type` ENUM('MARKET','LIMIT','STOP','STOP_LIMIT') NOT NULL,
  MODIFY COLUMN `timeInForce` ENUM('GTC','GTD','DAY','IOC','FOK') NOT NULL DEFAULT 'GTC',
  ADD COLUMN `limitPrice`    DECIMAL(20,10) NULL,
  ADD COLUMN `triggeredAt`   DATETIME(3)    NULL,
  ADD COLUMN `priceBound`    DECIMAL(20,10) NULL,
  ADD COLUMN `filledVolume`  DECIMAL(12,4)  NULL,
  ADD COLUMN `ocoOrderId`    BIGINT         NULL,
  ADD COLUMN `trailDistance` DECIMAL(20,10) NULL,
  ADD COLUMN `modifiedAt`    DATETIME(3)    NULL;

-- fx_position: a trailing stop is the distance (price units) it trails the market by and the
-- stop level the holder last stored. The level only ever moves in the trader's favour (up for a
-- BUY, down for a SELL); the holder writes it in batches as it moves, and a new holder goes on
-- from the stored level (docs/orders.md, «Trailing stops»).
ALTER TABLE `fx_position`
  ADD COLUMN `trailDistance` DECIMAL(20,10) NULL,
  ADD COLUMN `trailLevel`    DECIMAL(20,10) NULL;

-- The account group's position mode: HEDGING (several positions per symbol, either side; the
-- default and what every group did before), NETTING (one position per symbol; an opposite order
-- reduces, closes or reverses it) or FIFO (no hedging; an opposite order closes the oldest
-- positions first, NFA Compliance Rule 2-43b). Changed only while the group's accounts hold no
-- positions.
ALTER TABLE `fx_account_group`
  ADD COLUMN `positionMode` ENUM('HEDGING','NETTING','FIFO') NOT NULL DEFAULT 'HEDGING';
