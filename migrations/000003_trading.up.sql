-- The trading core (DESIGN §4): groups, accounts, orders, positions, the deals ledger, API tokens
-- and settings. Money is DECIMAL(20,2) in the account's currency; prices DECIMAL(20,10); volumes in
-- lots DECIMAL(12,4). Every statement is safe to run again except the ALTER at the end, which runs
-- last so a failure before it leaves nothing to undo.
--
-- Symbol groups price the desk's instruments: markup in points widens every fill (a buy pays
-- ask + markup, a sell receives bid − markup); commission is per lot, charged at open, in
-- `commissionCurrency` and converted to the account's currency through the USD hub; the hedged
-- margin rate is what each lot of an opposite pair on one symbol costs relative to an unhedged lot.
CREATE TABLE IF NOT EXISTS `fx_symbol_group` (
  `name`               VARCHAR(32)   NOT NULL,
  `markupPoints`       DECIMAL(12,4) NOT NULL DEFAULT 0,
  `commissionPerLot`   DECIMAL(20,4) NOT NULL DEFAULT 0,
  `commissionCurrency` CHAR(3)       NOT NULL DEFAULT 'USD',
  `hedgedMarginRate`   DECIMAL(6,4)  NOT NULL DEFAULT 0.5,
  `createdAt`          DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`          DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`name`),
  CONSTRAINT `chk_fx_symbol_group_values` CHECK (`markupPoints` >= 0 AND `commissionPerLot` >= 0 AND `hedgedMarginRate` BETWEEN 0 AND 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `fx_symbol_group` (`name`, `markupPoints`, `commissionPerLot`, `commissionCurrency`, `hedgedMarginRate`) VALUES
  ('default', 0, 7, 'USD', 0.5),
  ('majors', 0, 7, 'USD', 0.5),
  ('crosses', 0, 7, 'USD', 0.5),
  ('exotics', 0, 10, 'USD', 0.5),
  ('metals', 0, 10, 'USD', 0.5);

-- Account groups cap leverage and set the margin-call and stop-out levels (percent of margin level).
CREATE TABLE IF NOT EXISTS `fx_account_group` (
  `name`            VARCHAR(32)  NOT NULL,
  `leverageMax`     INT          NOT NULL DEFAULT 500,
  `marginCallLevel` DECIMAL(7,2) NOT NULL DEFAULT 100,
  `stopOutLevel`    DECIMAL(7,2) NOT NULL DEFAULT 50,
  `createdAt`       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`name`),
  CONSTRAINT `chk_fx_account_group_values` CHECK (`leverageMax` >= 1 AND `stopOutLevel` >= 0 AND `marginCallLevel` >= `stopOutLevel`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `fx_account_group` (`name`, `leverageMax`, `marginCallLevel`, `stopOutLevel`) VALUES
  ('default', 500, 100, 50);

-- A trading account of one platform user. The currency is fixed at creation. `balance` moves only
-- together with a deal row (Σ deals.amount = balance); `equity` and `usedMargin` are the last
-- marks written by a fill, a close or the reconcile job.
CREATE TABLE IF NOT EXISTS `fx_account` (
  `id`           BIGINT        NOT NULL AUTO_INCREMENT,
  `userId`       BIGINT        NOT NULL,
  `accountGroup` VARCHAR(32)   NOT NULL DEFAULT 'default',
  `currency`     CHAR(3)       NOT NULL,
  `leverage`     INT           NOT NULL,
  `balance`      DECIMAL(20,2) NOT NULL DEFAULT 0,
  `equity`       DECIMAL(20,2) NOT NULL DEFAULT 0,
  `usedMargin`   DECIMAL(20,2) NOT NULL DEFAULT 0,
  `markedAt`     DATETIME(3)   NULL,
  `createdAt`    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`    DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_account_user` (`userId`),
  CONSTRAINT `fk_fx_account_group` FOREIGN KEY (`accountGroup`) REFERENCES `fx_account_group` (`name`) ON UPDATE CASCADE,
  CONSTRAINT `chk_fx_account_leverage` CHECK (`leverage` >= 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Orders. A MARKET order is FILLED (or never written); LIMIT and STOP orders rest as PENDING until
-- the risk engine triggers them, they are cancelled, or they expire (GTD at `expiresAt`, DAY at the
-- next 17:00 New York rollover). `requestNonce` is unique per account: a retried submit returns the
-- original order instead of opening twice (NULLs do not collide). The position an order opened
-- names it (fx_position.orderId), so the link has one source of truth.
CREATE TABLE IF NOT EXISTS `fx_order` (
  `id`           BIGINT         NOT NULL AUTO_INCREMENT,
  `accountId`    BIGINT         NOT NULL,
  `symbol`       VARCHAR(12)    NOT NULL,
  `side`         ENUM('BUY','SELL') NOT NULL,
  `type`         ENUM('MARKET','LIMIT','STOP') NOT NULL,
  `volume`       DECIMAL(12,4)  NOT NULL,
  `price`        DECIMAL(20,10) NULL,
  `sl`           DECIMAL(20,10) NULL,
  `tp`           DECIMAL(20,10) NULL,
  `timeInForce`  ENUM('GTC','GTD','DAY') NOT NULL DEFAULT 'GTC',
  `expiresAt`    DATETIME(3)    NULL,
  `status`       ENUM('PENDING','FILLED','CANCELLED','EXPIRED','REJECTED') NOT NULL,
  `requestNonce` VARCHAR(64)    NULL,
  `fillPrice`    DECIMAL(20,10) NULL,
  `createdAt`    DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`    DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_order_nonce` (`accountId`, `requestNonce`),
  KEY `idx_fx_order_status` (`status`, `symbol`),
  CONSTRAINT `fk_fx_order_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`),
  CONSTRAINT `chk_fx_order_volume` CHECK (`volume` > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Positions (hedging: several per symbol and side). A partial close lowers `volume` and keeps the
-- id; `openVolume` is what was opened.
CREATE TABLE IF NOT EXISTS `fx_position` (
  `id`             BIGINT         NOT NULL AUTO_INCREMENT,
  `accountId`      BIGINT         NOT NULL,
  `orderId`        BIGINT         NOT NULL,
  `symbol`         VARCHAR(12)    NOT NULL,
  `side`           ENUM('BUY','SELL') NOT NULL,
  `volume`         DECIMAL(12,4)  NOT NULL,
  `openVolume`     DECIMAL(12,4)  NOT NULL,
  `openPrice`      DECIMAL(20,10) NOT NULL,
  `sl`             DECIMAL(20,10) NULL,
  `tp`             DECIMAL(20,10) NULL,
  `commission`     DECIMAL(20,2)  NOT NULL DEFAULT 0,
  `realizedProfit` DECIMAL(20,2)  NOT NULL DEFAULT 0,
  `status`         ENUM('OPEN','CLOSED') NOT NULL DEFAULT 'OPEN',
  `closePrice`     DECIMAL(20,10) NULL,
  `closeReason`    VARCHAR(16)    NULL,
  `openedAt`       DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `closedAt`       DATETIME(3)    NULL,
  `updatedAt`      DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_position_account` (`accountId`, `status`, `symbol`),
  KEY `idx_fx_position_symbol` (`status`, `symbol`),
  KEY `idx_fx_position_order` (`orderId`),
  CONSTRAINT `fk_fx_position_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`),
  CONSTRAINT `chk_fx_position_volume` CHECK (`volume` >= 0 AND `volume` <= `openVolume`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The ledger: one row per balance change, written in the same transaction as the change.
-- `balanceAfter` is the account balance once this deal applied; Σ amount = fx_account.balance.
-- `idempotencyKey` makes every charge happen once (deposit:…, commission:order:N, close:P:V, …).
CREATE TABLE IF NOT EXISTS `fx_deal` (
  `id`             BIGINT         NOT NULL AUTO_INCREMENT,
  `accountId`      BIGINT         NOT NULL,
  `type`           ENUM('DEPOSIT','WITHDRAWAL','COMMISSION','PROFIT','SWAP','ADJUSTMENT') NOT NULL,
  `amount`         DECIMAL(20,2)  NOT NULL,
  `balanceAfter`   DECIMAL(20,2)  NOT NULL,
  `currency`       CHAR(3)        NOT NULL,
  `orderId`        BIGINT         NULL,
  `positionId`     BIGINT         NULL,
  `symbol`         VARCHAR(12)    NULL,
  `side`           ENUM('BUY','SELL') NULL,
  `volume`         DECIMAL(12,4)  NULL,
  `price`          DECIMAL(20,10) NULL,
  `idempotencyKey` VARCHAR(128)   NOT NULL,
  `comment`        VARCHAR(255)   NOT NULL DEFAULT '',
  `createdAt`      DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_deal_idempotency` (`idempotencyKey`),
  KEY `idx_fx_deal_account` (`accountId`, `id`),
  CONSTRAINT `fk_fx_deal_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Bearer tokens, issued by `fxdesk-web token create`. Only the SHA-256 of a token is stored.
CREATE TABLE IF NOT EXISTS `fx_api_token` (
  `id`        BIGINT      NOT NULL AUTO_INCREMENT,
  `tokenHash` CHAR(64)    NOT NULL,
  `userId`    BIGINT      NOT NULL,
  `role`      ENUM('TRADER','ADMIN') NOT NULL,
  `label`     VARCHAR(64) NOT NULL DEFAULT '',
  `createdAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `revokedAt` DATETIME(3) NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_fx_api_token_hash` (`tokenHash`),
  KEY `idx_fx_api_token_user` (`userId`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Desk settings, name → value as text; the API validates each known name.
CREATE TABLE IF NOT EXISTS `fx_setting` (
  `name`      VARCHAR(64)  NOT NULL,
  `value`     VARCHAR(255) NOT NULL,
  `updatedAt` DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `fx_setting` (`name`, `value`) VALUES
  ('fxTradingQuoteStaleSecondsFx', '30');

-- The instrument's own leverage cap, the third term of the effective leverage
-- (min of account, account group, instrument). Metals trade at lower leverage.
ALTER TABLE `fx_instrument` ADD COLUMN `leverageMax` INT NOT NULL DEFAULT 500;
UPDATE `fx_instrument` SET `leverageMax` = 100 WHERE `symbolGroup` = 'metals';
