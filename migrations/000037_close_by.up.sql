-- Close-by (docs/orders.md, «Close-by»): one row per close-by sent with a requestNonce, written in
-- the close-by's own transaction. Its unique key binds the nonce to the account: a retry — even
-- one in the same group commit as its original — fails on the key and is answered with the
-- original pair, so a pair is never closed twice. The close deals keep the ledger's usual keys
-- (close:<position>:<volume before>).
CREATE TABLE IF NOT EXISTS `fx_close_by` (
  `id`           BIGINT      NOT NULL AUTO_INCREMENT,
  `accountId`    BIGINT      NOT NULL,
  `requestNonce` VARCHAR(64) NOT NULL,
  `positionId`   BIGINT      NOT NULL,
  `oppositeId`   BIGINT      NOT NULL,
  `createdAt`    DATETIME(3) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_close_by_nonce` (`accountId`, `requestNonce`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
