-- The other venue fills an EXTERNAL close's deal booked, beyond its own venueTransactionId: a
-- FIX venue may fill one close in several executions, each its own venue transaction, and the
-- desk books the close once, at the order's average price (docs/fix.md, «Fills in several
-- executions»). Each execution is recorded as booked for the position, so that the reconciler's
-- sum of the fills nobody booked adds up, and a fill is never booked twice (the key, as
-- uq_fx_deal_venue_fill does for the deal's own). dealTransactionId names the deal: its
-- venueTransactionId, unique per position.
CREATE TABLE IF NOT EXISTS `fx_deal_venue_fill` (
  `positionId`         BIGINT NOT NULL,
  `venueTransactionId` BIGINT NOT NULL,
  `dealTransactionId`  BIGINT NOT NULL,
  PRIMARY KEY (`positionId`, `venueTransactionId`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
