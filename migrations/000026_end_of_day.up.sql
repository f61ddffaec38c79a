-- The end of day (docs/eod.md). At each 17:00 New York rollover the book is frozen: the prices
-- the desk held at that instant, one row per account and one per symbol and account currency
-- for the desk. A trading day is named by its rollover's New York date: day D runs from the
-- previous rollover to D's 17:00.
--
-- All three tables are append-only: one code path inserts each (internal/eod) and nothing
-- updates or deletes a row; the primary keys make a second writer's row (a rerun, a concurrent
-- run, a run after a crash) a no-op instead of a second figure.

-- The closing prices of day D, captured at its rollover by whichever process was alive then
-- (the lease holder, or the cron process from the quote mirror): the first capture wins.
CREATE TABLE `fx_eod_price` (
  `tradingDay` DATE          NOT NULL,
  `symbol`     VARCHAR(12)   NOT NULL,
  `bid`        DECIMAL(20,10) NOT NULL,
  `ask`        DECIMAL(20,10) NOT NULL,
  `quotedAt`   DATETIME(3)   NOT NULL,
  `capturedAt` DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `capturedBy` VARCHAR(64)   NOT NULL,
  PRIMARY KEY (`tradingDay`, `symbol`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One account at the close of day D. `throughDealId` is the account's last deal the snapshot's
-- balance includes (0: none): day D's deals for the account are those after the previous
-- snapshot's `throughDealId` up to this one, which is what reconciliation and statements read.
-- The marks are NULL when a price or a conversion leg was missing at the close.
CREATE TABLE `fx_eod_account` (
  `tradingDay`    DATE          NOT NULL,
  `accountId`     BIGINT        NOT NULL,
  `currency`      CHAR(3)       NOT NULL,
  `balance`       DECIMAL(21,3) NOT NULL,
  `equity`        DECIMAL(21,3) NULL,
  `margin`        DECIMAL(21,3) NULL,
  `freeMargin`    DECIMAL(21,3) NULL,
  `floatingPnl`   DECIMAL(21,3) NULL,
  `openPositions` INT           NOT NULL,
  `pendingOrders` INT           NOT NULL,
  `throughDealId` BIGINT        NOT NULL,
  `takenAt`       DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`tradingDay`, `accountId`),
  KEY `idx_fx_eod_account_account` (`accountId`, `tradingDay`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The desk at the close of day D, per symbol and account currency: the clients' open lots on
-- the B-book and at the venue (long − short), the desk's hedge units at the venue, and the day's
-- figures from the desk's side as the dealer's P&L reads them (`symbol` '' collects deals
-- without one).
CREATE TABLE `fx_eod_symbol` (
  `tradingDay`  DATE          NOT NULL,
  `symbol`      VARCHAR(12)   NOT NULL,
  `currency`    CHAR(3)       NOT NULL,
  `bbookNet`    DECIMAL(16,4) NOT NULL,
  `abookNet`    DECIMAL(16,4) NOT NULL,
  `hedgeUnits`  DECIMAL(22,2) NOT NULL,
  `realised`    DECIMAL(21,3) NOT NULL,
  `markup`      DECIMAL(21,3) NOT NULL,
  `commission`  DECIMAL(21,3) NOT NULL,
  `swaps`       DECIMAL(21,3) NOT NULL,
  `nbp`         DECIMAL(21,3) NOT NULL,
  `hedgeBook`   DECIMAL(24,4) NOT NULL,
  `takenAt`     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`tradingDay`, `symbol`, `currency`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Day D frozen: written last, once every account and symbol row is in. `mode` says whether the
-- day was frozen at its rollover (ON_TIME) or later from the ledger as it stood then (CAUGHT_UP).
CREATE TABLE `fx_eod_day` (
  `tradingDay` DATE        NOT NULL,
  `rolloverAt` DATETIME(3) NOT NULL,
  `mode`       ENUM('ON_TIME','CAUGHT_UP') NOT NULL,
  `accounts`   INT         NOT NULL,
  `frozenAt`   DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `frozenBy`   VARCHAR(64) NOT NULL,
  PRIMARY KEY (`tradingDay`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
