-- The dealer's P&L summaries (docs/pnl.md, «Summaries»): what a range report reads instead of
-- re-aggregating the ledger. Deals and openings never change once committed (their amount,
-- markup, time and book — a position's venueTradeId — are written once), so a closed hour is
-- summed once and stays right.
--
-- fx_pnl_hour: one row per UTC hour, account currency, symbol ('' for deals without one), kind
-- and book. kind is the deal type the report counts (PROFIT, COMMISSION, SWAP; NBP for negative
-- balance protection's ADJUSTMENT deals, key 'nbp:…') or OPEN for the markup of opening fills.
-- amount is Σ the deals' amounts (0 for OPEN), markup Σ the recorded markup, unrecorded the
-- fills whose markup was not recorded.
CREATE TABLE IF NOT EXISTS `fx_pnl_hour` (
  `hour`       DATETIME       NOT NULL,
  `currency`   CHAR(3)        NOT NULL,
  `symbol`     VARCHAR(12)    NOT NULL,
  `kind`       ENUM('PROFIT','COMMISSION','SWAP','NBP','OPEN') NOT NULL,
  `abook`      TINYINT        NOT NULL,
  `amount`     DECIMAL(30,2)  NOT NULL,
  `markup`     DECIMAL(31,3)  NOT NULL,
  `unrecorded` BIGINT         NOT NULL,
  PRIMARY KEY (`hour`, `currency`, `symbol`, `kind`, `abook`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- fx_pnl_day: a trading day's figures per account currency and symbol (17:00 New York to 17:00
-- New York; dayStart is the opening rollover in UTC, always a whole UTC hour), summed from its
-- hours once all of them are: what a range of months reads, a row per currency and symbol a day.
-- profitBBook, commission, swaps and nbp are Σ the deals' amounts (the trader's side); the
-- markups are Σ the recorded markup of the book's opening and closing fills.
CREATE TABLE IF NOT EXISTS `fx_pnl_day` (
  `dayStart`    DATETIME       NOT NULL,
  `currency`    CHAR(3)        NOT NULL,
  `symbol`      VARCHAR(12)    NOT NULL,
  `profitBBook` DECIMAL(30,2)  NOT NULL,
  `markupBBook` DECIMAL(31,3)  NOT NULL,
  `markupABook` DECIMAL(31,3)  NOT NULL,
  `commission`  DECIMAL(30,2)  NOT NULL,
  `swaps`       DECIMAL(30,2)  NOT NULL,
  `nbp`         DECIMAL(30,2)  NOT NULL,
  `unrecorded`  BIGINT         NOT NULL,
  PRIMARY KEY (`dayStart`, `currency`, `symbol`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- fx_pnl_series: the report's series per UTC hour and account currency: what the desk earned in
-- the hour, floating P&L and the hedge book aside (the hedge book is read from its own few rows).
CREATE TABLE IF NOT EXISTS `fx_pnl_series` (
  `hour`     DATETIME      NOT NULL,
  `currency` CHAR(3)       NOT NULL,
  `amount`   DECIMAL(31,3) NOT NULL,
  PRIMARY KEY (`hour`, `currency`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- fx_pnl_summary: how far the summaries go. Every hour before `through` is in fx_pnl_hour and
-- fx_pnl_series, every trading day ending at or before it in fx_pnl_day. One row (id 1), locked
-- by the summariser while it works, so two processes summarising at once take turns.
-- An operator who must re-summarise (rows loaded into the past) sets `through` back; the
-- summariser rewrites from there.
CREATE TABLE IF NOT EXISTS `fx_pnl_summary` (
  `id`        TINYINT     NOT NULL,
  `through`   DATETIME    NULL,
  `updatedAt` DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The desk's book reads the open positions alone: the dealer's floating P&L (the open B-book
-- positions per account, symbol and side) and the exposures on /desk and the status page (per
-- symbol and book). idx_fx_position_symbol keeps its prefix (status, symbol), so every read that
-- used it still does, and gains the columns those reads need, so they cost the open positions'
-- index entries — never a closed position (the optimiser had intersected the status index with
-- venueTradeId's, whose NULLs are every closed B-book position). Rebuilding an index is an
-- in-place change on MySQL 8 and MariaDB alike.
ALTER TABLE `fx_position`
  DROP KEY `idx_fx_position_symbol`,
  ADD KEY `idx_fx_position_symbol` (`status`, `symbol`, `venueTradeId`, `side`, `accountId`, `volume`, `openPrice`);
