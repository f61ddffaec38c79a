-- The hedge book (docs/routing.md, «Hedge book»): the desk's own positions at the venue, kept
-- apart from every trader's. Its orders go to the venue with client id "H<id>" (REST
-- clientExtensions.id, FIX ClOrdID), so the reconciler tells them from client trades (a client
-- order's client id is its bare number): a hedge trade is adopted into the hedge book by that id,
-- never closed as an orphan, never adopted as a client's. Nothing here touches a trader's
-- account: no deals, no balance.

-- A hedge order: the identity row, written SENDING before the request leaves (identity before
-- action). An answer that never came leaves it SENDING; it is never re-sent: the reconciler
-- resolves it by its client id (FILLED: the trade adopted; REJECTED: the venue cancelled it;
-- NOT_SENT: no trace past FXDESK_VENUE_NOT_SENT_AFTER). `units` are signed venue units (positive
-- buys). `why` is RULE (a HEDGE n% routing rule's share of client position `clientPositionId`)
-- or HEDGER (the hedger's net exposure limit).
CREATE TABLE `fx_hedge_order` (
  `id`               BIGINT        NOT NULL AUTO_INCREMENT,
  `symbol`           VARCHAR(12)   NOT NULL,
  `units`            DECIMAL(20,2) NOT NULL,
  `why`              ENUM('RULE','HEDGER') NOT NULL,
  `clientPositionId` BIGINT        NULL,
  `status`           ENUM('SENDING','FILLED','NOT_SENT','REJECTED') NOT NULL,
  `reason`           VARCHAR(64)   NULL,
  `venueOrderId`     VARCHAR(32)   NULL,
  `fillPrice`        DECIMAL(20,10) NULL,
  `sentAt`           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_hedge_order_status` (`status`),
  KEY `idx_fx_hedge_order_client` (`clientPositionId`, `status`),
  CONSTRAINT `chk_fx_hedge_order_units` CHECK (`units` <> 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- A hedge position: one venue trade the hedge book holds, opened by hedge order `orderId`.
-- `realizedPl` is (closePrice − openPrice) × units in the symbol's quote currency
-- (`plCurrency`), what the venue's fills made, before any conversion; the dealer's P&L reads it
-- by `closedAt`. One live row per venue
-- trade, as for client positions (000010): `liveVenueTradeId` is the trade id while OPEN.
CREATE TABLE `fx_hedge_position` (
  `id`                 BIGINT         NOT NULL AUTO_INCREMENT,
  `orderId`            BIGINT         NOT NULL,
  `symbol`             VARCHAR(12)    NOT NULL,
  `units`              DECIMAL(20,2)  NOT NULL,
  `venueTradeId`       VARCHAR(32)    NOT NULL,
  `liveVenueTradeId`   VARCHAR(32)    AS (CASE WHEN `status` = 'OPEN' THEN `venueTradeId` END) STORED,
  `clientPositionId`   BIGINT         NULL,
  `status`             ENUM('OPEN','CLOSED') NOT NULL DEFAULT 'OPEN',
  `openPrice`          DECIMAL(20,10) NOT NULL,
  `openedAt`           DATETIME(3)    NOT NULL,
  `closePrice`         DECIMAL(20,10) NULL,
  `closedAt`           DATETIME(3)    NULL,
  `closeReason`        VARCHAR(16)    NULL,
  `closeTransactionId` BIGINT         NULL,
  `realizedPl`         DECIMAL(24,4)  NULL,
  `plCurrency`         CHAR(3)        NOT NULL,
  `updatedAt`          DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_hedge_position_order` (`orderId`),
  UNIQUE KEY `uq_fx_hedge_position_trade` (`liveVenueTradeId`),
  KEY `idx_fx_hedge_position_status` (`status`, `symbol`),
  KEY `idx_fx_hedge_position_client` (`clientPositionId`, `status`),
  KEY `idx_fx_hedge_position_closed` (`closedAt`),
  CONSTRAINT `fk_fx_hedge_position_order` FOREIGN KEY (`orderId`) REFERENCES `fx_hedge_order` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- HEDGE n%: a routing rule may book the trade on the desk and open n% of it at the venue in the
-- hedge book. The rule keeps its n; the order keeps the n it was routed with (the decision is
-- made once, at acceptance).
ALTER TABLE `fx_routing_rule`
  MODIFY COLUMN `action` ENUM('B_BOOK','A_BOOK','HEDGE') NOT NULL,
  ADD COLUMN `hedgePercent` TINYINT UNSIGNED NULL AFTER `action`;

ALTER TABLE `fx_order`
  ADD COLUMN `hedgePercent` TINYINT UNSIGNED NULL AFTER `routeRuleId`;

-- The position a HEDGE order opened carries its percent too, so the holder's sweep for
-- positions still to hedge reads the open HEDGE positions alone (status first), not every open
-- position with its order.
ALTER TABLE `fx_position`
  ADD COLUMN `hedgePercent` TINYINT UNSIGNED NULL AFTER `venueTradeId`,
  ADD KEY `idx_fx_position_hedge` (`status`, `hedgePercent`);
