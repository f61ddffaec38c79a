-- Four eyes on client money (docs/identity.md, «Four eyes on client money»). A deposit or a
-- withdrawal that desk staff make above the desk's threshold (setting fxFourEyesAbove) is not
-- made at once: it is written here PENDING, and made only when a second finance user — another
-- platform user, not another token of the same one — approves it. The approval's deal and the
-- request's APPROVED state, with the deal's id, are one transaction, so a deal never exists
-- without its approved request nor an approved request without its deal (the CHECK says the
-- second half in the schema). A request not decided by `expiresAt` (the database's clock) can
-- no longer be approved and is marked EXPIRED when next touched.
--
-- `requestNonce` is unique per account and kind: a retried creation returns the first request
-- instead of a second one (NULLs do not collide). `amount` is positive, in the account's
-- currency, with fx_deal's precision. The requester, their token and the decider are recorded
-- as the platform's user ids and the desk's token id, as fx_audit records its actors.
CREATE TABLE `fx_money_request` (
  `id`             BIGINT        NOT NULL AUTO_INCREMENT,
  `accountId`      BIGINT        NOT NULL,
  `kind`           ENUM('DEPOSIT','WITHDRAWAL') NOT NULL,
  `amount`         DECIMAL(21,3) NOT NULL,
  `currency`       CHAR(3)       NOT NULL,
  `comment`        VARCHAR(255)  NOT NULL DEFAULT '',
  `requestNonce`   VARCHAR(64)   NULL,
  `state`          ENUM('PENDING','APPROVED','REJECTED','EXPIRED') NOT NULL DEFAULT 'PENDING',
  `requestedBy`    BIGINT        NOT NULL,
  `requestedToken` BIGINT        NULL,
  `decidedBy`      BIGINT        NULL,
  `decidedAt`      DATETIME(3)   NULL,
  `reason`         VARCHAR(255)  NULL,
  `expiresAt`      DATETIME(3)   NOT NULL,
  `dealId`         BIGINT        NULL,
  `createdAt`      DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_money_request_nonce` (`accountId`, `kind`, `requestNonce`),
  KEY `idx_fx_money_request_state` (`state`, `id`),
  CONSTRAINT `fk_fx_money_request_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`),
  CONSTRAINT `chk_fx_money_request_amount` CHECK (`amount` > 0),
  CONSTRAINT `chk_fx_money_request_deal` CHECK ((`state` = 'APPROVED') = (`dealId` IS NOT NULL))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
