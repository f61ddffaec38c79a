-- Routing (docs/routing.md). Each account group may route its orders by rule instead of by its
-- execution mode alone: a rule matches on accounts, symbols, volume and the trader's profile and
-- routes to B_BOOK (the desk fills) or A_BOOK (the venue fills); the first match by `priority`
-- (1 first; ties by id) wins, and the group's `executionMode` is the default. `accounts` and
-- `symbols` are JSON arrays (NULL: any). The profile conditions hold only for an account with at
-- least `minTrades` closed trades: `profitFactorMin` (gross profit ≥ x × gross loss),
-- `winRateMin` and `underMinuteShareMin` (percent of the closed trades), `avgHoldSecondsMax`
-- (average holding time under it). A rule's id is kept on the orders it routed
-- (`fx_order.routeRuleId`, NULL: the group's default), so no foreign key: a deleted rule's
-- orders still name it, and the audit log holds what it said.
CREATE TABLE `fx_routing_rule` (
  `id`                  BIGINT        NOT NULL AUTO_INCREMENT,
  `accountGroup`        VARCHAR(32)   NOT NULL,
  `priority`            INT           NOT NULL,
  `accounts`            LONGTEXT      NULL,
  `symbols`             LONGTEXT      NULL,
  `volumeMin`           DECIMAL(12,4) NULL,
  `volumeMax`           DECIMAL(12,4) NULL,
  `minTrades`           BIGINT        NULL,
  `profitFactorMin`     DECIMAL(12,4) NULL,
  `winRateMin`          DECIMAL(5,2)  NULL,
  `avgHoldSecondsMax`   DECIMAL(15,3) NULL,
  `underMinuteShareMin` DECIMAL(5,2)  NULL,
  `action`              ENUM('B_BOOK','A_BOOK') NOT NULL,
  `note`                VARCHAR(255)  NOT NULL DEFAULT '',
  `createdAt`           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`           DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`),
  KEY `idx_fx_routing_rule_group` (`accountGroup`, `priority`, `id`),
  CONSTRAINT `fk_fx_routing_rule_group` FOREIGN KEY (`accountGroup`) REFERENCES `fx_account_group` (`name`) ON UPDATE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE `fx_order`
  ADD COLUMN `routeRuleId` BIGINT NULL AFTER `execution`;

-- The trader profile, one row per account that has closed a trade: every close deal (a full or
-- a partial close) is one trade, its profit the deal's amount in the account's currency, its
-- holding time from the position's opening to the close. The close that books the deal adds
-- its trade to the row in the same transaction; figures (win rate, profit factor, averages)
-- are worked out when read.
CREATE TABLE `fx_account_profile` (
  `accountId`   BIGINT        NOT NULL,
  `trades`      BIGINT        NOT NULL DEFAULT 0,
  `wins`        BIGINT        NOT NULL DEFAULT 0,
  `grossProfit` DECIMAL(24,3) NOT NULL DEFAULT 0,
  `grossLoss`   DECIMAL(24,3) NOT NULL DEFAULT 0,
  `holdMillis`  BIGINT        NOT NULL DEFAULT 0,
  `underMinute` BIGINT        NOT NULL DEFAULT 0,
  `lastTradeAt` DATETIME(3)   NULL,
  PRIMARY KEY (`accountId`),
  CONSTRAINT `fk_fx_account_profile_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Backfill from the ledger's close deals, once: every PROFIT deal is a close.
INSERT INTO `fx_account_profile` (`accountId`, `trades`, `wins`, `grossProfit`, `grossLoss`, `holdMillis`, `underMinute`, `lastTradeAt`)
SELECT d.`accountId`, COUNT(*), SUM(CASE WHEN d.`amount` > 0 THEN 1 ELSE 0 END),
  SUM(CASE WHEN d.`amount` > 0 THEN d.`amount` ELSE 0 END), SUM(CASE WHEN d.`amount` < 0 THEN -d.`amount` ELSE 0 END),
  SUM(GREATEST(TIMESTAMPDIFF(MICROSECOND, p.`openedAt`, d.`createdAt`), 0) DIV 1000),
  SUM(CASE WHEN TIMESTAMPDIFF(MICROSECOND, p.`openedAt`, d.`createdAt`) < 60000000 THEN 1 ELSE 0 END), MAX(d.`createdAt`)
FROM `fx_deal` d JOIN `fx_position` p ON p.`id` = d.`positionId`
WHERE d.`type` = 'PROFIT'
GROUP BY d.`accountId`;
