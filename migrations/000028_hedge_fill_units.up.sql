-- An opening hedge order's fill may be smaller than the order (a venue that found liquidity for
-- part of it): `fillUnits` are the signed units the venue filled, beside `fillPrice`. A hedge position's
-- realised P&L on the venue's own closes is worked out from them (the venue's average close
-- price over every unit of the trade), never from the units ordered (docs/routing.md, «Hedge
-- book»). Orders filled before this column were booked as wholly filled: their fill is their
-- units.
ALTER TABLE `fx_hedge_order` ADD COLUMN `fillUnits` DECIMAL(20,2) NULL AFTER `fillPrice`;
UPDATE `fx_hedge_order` SET `fillUnits` = `units` WHERE `status` = 'FILLED' AND `reducesPositionId` IS NULL;
