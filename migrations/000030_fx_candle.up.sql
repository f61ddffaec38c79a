-- Price history (docs/candles.md): bid and ask candles built by the lease holder from the prices
-- the desk published, one row per symbol, granularity and open. openTime is the candle's open in
-- UTC: a multiple of its length for M1, M5 and H1, the 17:00 New York rollover that opens the
-- trading day for D1. A candle exists only where a tick was published: a closed market has no
-- rows, never flat ones. ticks counts the published ticks the candle holds. The holder upserts the
-- candle in progress every few seconds (high and low merged, close replaced, ticks added), so a
-- takeover loses at most one flush interval. Prices as every price column: DECIMAL(20,10).
CREATE TABLE IF NOT EXISTS `fx_candle` (
  `symbol`      VARCHAR(12)                  NOT NULL,
  `granularity` ENUM('M1', 'M5', 'H1', 'D1') NOT NULL,
  `openTime`    DATETIME(3)                  NOT NULL,
  `bidOpen`     DECIMAL(20,10)               NOT NULL,
  `bidHigh`     DECIMAL(20,10)               NOT NULL,
  `bidLow`      DECIMAL(20,10)               NOT NULL,
  `bidClose`    DECIMAL(20,10)               NOT NULL,
  `askOpen`     DECIMAL(20,10)               NOT NULL,
  `askHigh`     DECIMAL(20,10)               NOT NULL,
  `askLow`      DECIMAL(20,10)               NOT NULL,
  `askClose`    DECIMAL(20,10)               NOT NULL,
  `ticks`       INT UNSIGNED                 NOT NULL,
  PRIMARY KEY (`symbol`, `granularity`, `openTime`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
