UPDATE `fx_api_token` SET `role` = 'TRADER' WHERE `role` = 'trader';
UPDATE `fx_api_token` SET `role` = 'ADMIN' WHERE `role` <> 'TRADER';
ALTER TABLE `fx_api_token`
  DROP COLUMN `lastUsedFrom`,
  DROP COLUMN `lastUsedAt`,
  DROP COLUMN `expiresAt`,
  DROP COLUMN `scopes`,
  MODIFY COLUMN `role` ENUM('TRADER','ADMIN') NOT NULL;
