DELETE FROM `fx_hedge_order` WHERE `reducesPositionId` IS NOT NULL;
ALTER TABLE `fx_hedge_order` DROP COLUMN `leaveUnits`, DROP COLUMN `reducesPositionId`;
