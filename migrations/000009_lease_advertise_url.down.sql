ALTER TABLE `engine_lease`
  DROP COLUMN `advertiseUrl`;
