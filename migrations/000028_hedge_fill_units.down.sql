ALTER TABLE `fx_hedge_order` DROP COLUMN `fillUnits`;
