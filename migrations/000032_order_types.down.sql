ALTER TABLE `fx_account_group` DROP COLUMN `positionMode`;
ALTER TABLE `fx_position` DROP COLUMN `trailLevel`, DROP COLUMN `trailDistance`;
-- Never delete an order row: a STOP_LIMIT reads back as the STOP it was placed as, IOC/FOK as
-- the GTC every MARKET order was stored with before.
UPDATE `fx_order` SET `type` = 'STOP' WHERE `type` = 'STOP_LIMIT';
UPDATE `fx_order` SET `timeInForce` = 'GTC' WHERE `timeInForce` IN ('IOC','FOK');
ALTER TABLE `fx_order`
  DROP COLUMN `modifiedAt`,
  DROP COLUMN `trailDistance`,
  DROP COLUMN `ocoOrderId`,
  DROP COLUMN `filledVolume`,
  DROP COLUMN `priceBound`,
  DROP COLUMN `triggeredAt`,
  DROP COLUMN `limitPrice`,
  MODIFY COLUMN `timeInForce` ENUM('GTC','GTD','DAY') NOT NULL DEFAULT 'GTC',
  MODIFY COLUMN `type` ENUM('MARKET','LIMIT','STOP') NOT NULL;
