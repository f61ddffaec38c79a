-- Trading-session calendars and the instrument table (DESIGN §3, §4).
--
-- A calendar's weekly schedule and holidays are JSON text in New York wall-clock time, read by
-- internal/session (FromText): weeklySchedule [{"open":"Sun 17:00","close":"Fri 17:00"}],
-- holidays [{"date":"12-25"}] (MM-DD every year, or YYYY-MM-DD once; optional closedFrom and
-- closedTo, default the whole day). Plain text rather than JSON columns so that MySQL 8 and
-- MariaDB store and return it byte for byte.
CREATE TABLE IF NOT EXISTS `fx_session_calendar` (
  `name`           VARCHAR(32)  NOT NULL,
  `timezone`       VARCHAR(64)  NOT NULL DEFAULT 'America/New_York',
  `weeklySchedule` TEXT         NOT NULL,
  `holidays`       TEXT         NOT NULL,
  `createdAt`      DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`      DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT IGNORE INTO `fx_session_calendar` (`name`, `timezone`, `weeklySchedule`, `holidays`) VALUES
  ('forex', 'America/New_York',
   '[{"open":"Sun 17:00","close":"Fri 17:00"}]',
   '[{"date":"12-25"},{"date":"01-01"}]'),
  ('metals', 'America/New_York',
   '[{"open":"Sun 18:00","close":"Mon 17:00"},{"open":"Mon 18:00","close":"Tue 17:00"},{"open":"Tue 18:00","close":"Wed 17:00"},{"open":"Wed 18:00","close":"Thu 17:00"},{"open":"Thu 18:00","close":"Fri 17:00"}]',
   '[{"date":"12-25"},{"date":"01-01"}]');

-- One row per tradable symbol (six letters, no separator: EURUSD). Prices are quoted with
-- `digits` decimals and `point` = 10^-digits; swaps are in points per lot per night, charged at
-- the 17:00 New York rollover, tripled on `tripleSwapDay` (0 = Sunday … 6 = Saturday; 3 =
-- Wednesday, which carries the weekend). `status` gates trading: CLOSE_ONLY refuses opens,
-- HALTED refuses everything; `enabled` decides whether the tick engine subscribes it at all.
CREATE TABLE IF NOT EXISTS `fx_instrument` (
  `symbol`          VARCHAR(12)    NOT NULL,
  `base`            CHAR(3)        NOT NULL,
  `quote`           CHAR(3)        NOT NULL,
  `digits`          INT            NOT NULL,
  `contractSize`    DECIMAL(20,4)  NOT NULL,
  `point`           DECIMAL(20,10) NOT NULL,
  `volumeMin`       DECIMAL(12,4)  NOT NULL DEFAULT 0.01,
  `volumeStep`      DECIMAL(12,4)  NOT NULL DEFAULT 0.01,
  `volumeMax`       DECIMAL(12,4)  NOT NULL DEFAULT 100,
  `swapLong`        DECIMAL(12,4)  NOT NULL DEFAULT 0,
  `swapShort`       DECIMAL(12,4)  NOT NULL DEFAULT 0,
  `tripleSwapDay`   TINYINT        NOT NULL DEFAULT 3,
  `sessionCalendar` VARCHAR(32)    NOT NULL DEFAULT 'forex',
  `status`          ENUM('ACTIVE','CLOSE_ONLY','HALTED') NOT NULL DEFAULT 'ACTIVE',
  `enabled`         BOOL           NOT NULL DEFAULT TRUE,
  `symbolGroup`     VARCHAR(32)    NOT NULL DEFAULT 'default',
  `createdAt`       DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `updatedAt`       DATETIME(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`symbol`),
  KEY `idx_fx_instrument_group` (`symbolGroup`),
  CONSTRAINT `fk_fx_instrument_calendar` FOREIGN KEY (`sessionCalendar`)
    REFERENCES `fx_session_calendar` (`name`) ON UPDATE CASCADE,
  CONSTRAINT `chk_fx_instrument_digits` CHECK (`digits` BETWEEN 0 AND 10),
  CONSTRAINT `chk_fx_instrument_triple` CHECK (`tripleSwapDay` BETWEEN 0 AND 6),
  CONSTRAINT `chk_fx_instrument_volume` CHECK (`volumeMin` > 0 AND `volumeStep` > 0 AND `volumeMax` >= `volumeMin`),
  CONSTRAINT `chk_fx_instrument_contract` CHECK (`contractSize` > 0 AND `point` > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The default set, the same symbols the bundled feed simulator quotes (internal/feedsim):
-- 7 majors, 21 crosses, 8 exotics, spot gold (100 oz) and silver (5,000 oz).
INSERT IGNORE INTO `fx_instrument`
  (`symbol`, `base`, `quote`, `digits`, `contractSize`, `point`, `volumeMin`, `volumeStep`, `volumeMax`,
   `swapLong`, `swapShort`, `tripleSwapDay`, `sessionCalendar`, `status`, `enabled`, `symbolGroup`)
VALUES
  ('EURUSD', 'EUR', 'USD', 5, 100000, 0.00001, 0.01, 0.01, 100, -7.50, 2.20, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('GBPUSD', 'GBP', 'USD', 5, 100000, 0.00001, 0.01, 0.01, 100, -3.10, -1.20, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('USDJPY', 'USD', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 14.80, -27.50, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('USDCHF', 'USD', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 6.90, -13.20, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('USDCAD', 'USD', 'CAD', 5, 100000, 0.00001, 0.01, 0.01, 100, 2.10, -7.40, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('AUDUSD', 'AUD', 'USD', 5, 100000, 0.00001, 0.01, 0.01, 100, -3.40, -0.60, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('NZDUSD', 'NZD', 'USD', 5, 100000, 0.00001, 0.01, 0.01, 100, -3.90, 0.20, 3, 'forex', 'ACTIVE', TRUE, 'majors'),
  ('EURGBP', 'EUR', 'GBP', 5, 100000, 0.00001, 0.01, 0.01, 100, -5.60, 1.10, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('EURJPY', 'EUR', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 8.10, -19.80, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('EURCHF', 'EUR', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 1.20, -7.90, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('EURAUD', 'EUR', 'AUD', 5, 100000, 0.00001, 0.01, 0.01, 100, -9.80, 3.20, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('EURCAD', 'EUR', 'CAD', 5, 100000, 0.00001, 0.01, 0.01, 100, -4.70, -0.90, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('EURNZD', 'EUR', 'NZD', 5, 100000, 0.00001, 0.01, 0.01, 100, -5.90, 0.40, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('GBPJPY', 'GBP', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 16.20, -32.00, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('GBPCHF', 'GBP', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 7.40, -15.60, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('GBPAUD', 'GBP', 'AUD', 5, 100000, 0.00001, 0.01, 0.01, 100, -3.80, -4.10, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('GBPCAD', 'GBP', 'CAD', 5, 100000, 0.00001, 0.01, 0.01, 100, 1.90, -9.70, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('GBPNZD', 'GBP', 'NZD', 5, 100000, 0.00001, 0.01, 0.01, 100, 2.60, -12.40, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('AUDJPY', 'AUD', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 8.70, -18.10, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('AUDCHF', 'AUD', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 3.50, -8.60, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('AUDCAD', 'AUD', 'CAD', 5, 100000, 0.00001, 0.01, 0.01, 100, -0.80, -3.10, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('AUDNZD', 'AUD', 'NZD', 5, 100000, 0.00001, 0.01, 0.01, 100, -0.90, -4.20, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('NZDJPY', 'NZD', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 5.20, -13.40, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('NZDCHF', 'NZD', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 1.80, -6.10, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('NZDCAD', 'NZD', 'CAD', 5, 100000, 0.00001, 0.01, 0.01, 100, -2.20, -1.70, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('CADJPY', 'CAD', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, 7.10, -15.90, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('CADCHF', 'CAD', 'CHF', 5, 100000, 0.00001, 0.01, 0.01, 100, 2.40, -7.20, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('CHFJPY', 'CHF', 'JPY', 3, 100000, 0.001, 0.01, 0.01, 100, -4.10, -9.80, 3, 'forex', 'ACTIVE', TRUE, 'crosses'),
  ('USDSEK', 'USD', 'SEK', 5, 100000, 0.00001, 0.01, 0.01, 50, 38.00, -95.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDNOK', 'USD', 'NOK', 5, 100000, 0.00001, 0.01, 0.01, 50, 12.00, -68.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDMXN', 'USD', 'MXN', 5, 100000, 0.00001, 0.01, 0.01, 50, -420.00, 185.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDZAR', 'USD', 'ZAR', 5, 100000, 0.00001, 0.01, 0.01, 50, -310.00, 140.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDSGD', 'USD', 'SGD', 5, 100000, 0.00001, 0.01, 0.01, 50, 4.50, -12.30, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDHKD', 'USD', 'HKD', 5, 100000, 0.00001, 0.01, 0.01, 50, -5.20, -8.10, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDCNH', 'USD', 'CNH', 5, 100000, 0.00001, 0.01, 0.01, 50, 28.00, -75.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('USDPLN', 'USD', 'PLN', 5, 100000, 0.00001, 0.01, 0.01, 50, -22.00, -4.00, 3, 'forex', 'ACTIVE', TRUE, 'exotics'),
  ('XAUUSD', 'XAU', 'USD', 2, 100, 0.01, 0.01, 0.01, 50, -42.00, 18.00, 3, 'metals', 'ACTIVE', TRUE, 'metals'),
  ('XAGUSD', 'XAG', 'USD', 3, 5000, 0.001, 0.01, 0.01, 50, -8.50, 2.30, 3, 'metals', 'ACTIVE', TRUE, 'metals');
