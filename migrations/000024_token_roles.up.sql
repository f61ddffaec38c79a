-- Tokens carry a role from a named set (docs/identity.md, «Roles»): trader, or one of the desk
-- staff roles viewer, support, dealer, risk, finance and superadmin, each a set of permissions
-- the admin routes name. A trader's token also carries scopes ("read", "read trade"). A token
-- may expire; the desk records when and from which address it was last used (to within the
-- resolver's flush interval), never the token. Every existing admin token becomes a superadmin's,
-- which is exactly what an admin token could do before.
ALTER TABLE `fx_api_token`
  MODIFY COLUMN `role` VARCHAR(16) NOT NULL,
  ADD COLUMN `scopes` VARCHAR(32) NOT NULL DEFAULT '' AFTER `role`,
  ADD COLUMN `expiresAt` DATETIME(3) NULL AFTER `createdAt`,
  ADD COLUMN `lastUsedAt` DATETIME(3) NULL AFTER `revokedAt`,
  ADD COLUMN `lastUsedFrom` VARCHAR(64) NOT NULL DEFAULT '' AFTER `lastUsedAt`;
UPDATE `fx_api_token` SET `role` = 'superadmin' WHERE `role` = 'ADMIN';
UPDATE `fx_api_token` SET `role` = 'trader', `scopes` = 'read trade' WHERE `role` = 'TRADER';
