-- Rollovers and account marks (DESIGN §7).
--
-- A swap-free account is skipped by the rollover job (its positions' watermark still advances,
-- so lifting the flag later never back-charges the days it was swap-free).
--
-- `fx_position`.`swap` is the swap accrued by the position in the account's currency (Σ of its
-- SWAP deals); `swapThrough` is the last rollover date the job has settled for it — charged,
-- parked as pending, or skipped (swap-free, zero swap). The job selects positions whose
-- watermark is behind a due date and moves it in the same transaction as the deal, so a second
-- run, a second process or a rerun after a crash finds nothing left to do. The deal's unique
-- idempotency key `swap:<positionId>:<date>` is the last word.
--
-- `fx_swap_charge` holds the rollovers that could not be converted to the account currency when
-- they were due (no mid for a leg of the USD hub): the amount in the quote currency is fixed at
-- that moment, retried by every hourly run, and EXPIRED uncharged 7 days after its rollover with
-- a `swap-charge-expired` alert. CHARGED rows keep the history of what was late.
CREATE TABLE IF NOT EXISTS `fx_swap_charge` (
  `positionId`      BIGINT         NOT NULL,
  `rolloverDate`    DATE           NOT NULL,
  `accountId`       BIGINT         NOT NULL,
  `symbol`          VARCHAR(12)    NOT NULL,
  `side`            ENUM('BUY','SELL') NOT NULL,
  `volume`          DECIMAL(12,4)  NOT NULL,
  `days`            TINYINT        NOT NULL,
  `amountQuote`     DECIMAL(30,10) NOT NULL,
  `quoteCurrency`   CHAR(3)        NOT NULL,
  `accountCurrency` CHAR(3)        NOT NULL,
  `status`          ENUM('PENDING','CHARGED','EXPIRED') NOT NULL DEFAULT 'PENDING',
  `missingLegs`     VARCHAR(255)   NOT NULL DEFAULT '',
  `attempts`        INT            NOT NULL DEFAULT 1,
  `amount`          DECIMAL(20,2)  NULL,
  `createdAt`       DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `lastTriedAt`     DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `settledAt`       DATETIME(3)    NULL,
  PRIMARY KEY (`positionId`, `rolloverDate`),
  KEY `idx_fx_swap_charge_status` (`status`, `rolloverDate`),
  CONSTRAINT `fk_fx_swap_charge_account` FOREIGN KEY (`accountId`) REFERENCES `fx_account` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE `fx_account` ADD COLUMN `swapFree` BOOL NOT NULL DEFAULT FALSE;
ALTER TABLE `fx_position` ADD COLUMN `swap` DECIMAL(20,2) NOT NULL DEFAULT 0, ADD COLUMN `swapThrough` DATE NULL, ADD KEY `idx_fx_position_open` (`status`, `id`);
