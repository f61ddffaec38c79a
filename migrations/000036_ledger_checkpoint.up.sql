-- The reconcile job's ledger check (internal/marks, docs/architecture.md «Scheduled jobs») compares
-- every balance with the sum of its account's deals. Summing every deal every five minutes grew
-- with the ledger's age (4.6 s over a year of 5,000,000 deals); instead each account's checked
-- prefix is kept here: `dealsSum` is the sum of the account's deals with id ≤ `throughDealId`,
-- computed from the deals themselves — never from the balance, so a drift is never folded into
-- it. A check reads the account's balance, this row and the deals after `throughDealId` (its
-- (accountId, id) index range: the deals since the last check) in one consistent read, and moves
-- the row forward.
--
-- An account's deals get increasing ids in commit order (every deal is inserted after the
-- ledger's UPDATE of its account row, under that row's lock, until COMMIT), and deals are never
-- updated or deleted in place, so a prefix summed once stays the sum of those deals. Only
-- internal/marks writes the table; dropping its rows only makes the next check sum every deal
-- again.
CREATE TABLE `fx_ledger_checkpoint` (
  `accountId`     BIGINT        NOT NULL,
  `throughDealId` BIGINT        NOT NULL,
  `dealsSum`      DECIMAL(24,2) NOT NULL,
  `checkedAt`     DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (`accountId`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The rollover's pass (internal/swaps) goes over the open positions account by account: each
-- batch then writes the deals and events of neighbouring accounts, whose (accountId, id) index
-- pages are neighbours too, instead of 500 accounts scattered over the whole ledger and outbox —
-- on a year of history, a page read from disk for nearly every charge. InnoDB appends the
-- primary key, so this index is (status, accountId, id): the pass's keyset order.
ALTER TABLE `fx_position` ADD KEY `idx_fx_position_open_account` (`status`, `accountId`);
