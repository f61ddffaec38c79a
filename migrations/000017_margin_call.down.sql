ALTER TABLE `fx_account` DROP COLUMN `marginCallAt`;
