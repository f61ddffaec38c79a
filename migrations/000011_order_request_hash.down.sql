ALTER TABLE `fx_order`
  DROP COLUMN `requestHash`;
