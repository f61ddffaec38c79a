-- A HEDGE n% share follows its client position down (docs/routing.md, «Hedge book»): when the
-- client closes part of a hedged position, the holder closes part of its hedge at the venue with
-- a reduction order. Its identity row is a hedge order like an open's, written SENDING before the
-- close leaves: `reducesPositionId` is the hedge position it closes part of, `units` the signed
-- units it closes (opposite to the position's) and `leaveUnits` the signed units the position
-- holds once it filled. The venue's close carries no client id of its own, so an unknown outcome
-- is resolved by the reconciler from that trade: reduced to `leaveUnits` or below: FILLED; still
-- larger past FXDESK_VENUE_NOT_SENT_AFTER: NOT_SENT (the next pass decides again).
ALTER TABLE `fx_hedge_order`
  ADD COLUMN `reducesPositionId` BIGINT NULL AFTER `clientPositionId`,
  ADD COLUMN `leaveUnits` DECIMAL(20,2) NULL AFTER `reducesPositionId`;
