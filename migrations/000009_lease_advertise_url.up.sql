-- The holder advertises where it answers HTTP, so that follower web processes can forward
-- desk-priced requests to it (DESIGN §12, "The web tier scales out"). NULL on a row written by a
-- binary that predates this column, and on a holder granted by Redis or fail-open (no row).
ALTER TABLE `engine_lease`
  ADD COLUMN `advertiseUrl` VARCHAR(255) NULL AFTER `pid`;
