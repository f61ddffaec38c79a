-- The risk engine follows balances that other processes change (the rollover job) by commit, not
-- by deal id: deal ids are assigned at insert and transactions commit in any order, so a swap
-- batch that inserted deals 100–140 and committed after a close that inserted 141 was never seen.
-- `balanceVersion` is bumped by the ledger's one balance UPDATE, in the transaction that moves the
-- balance; every committed balance of an account has its own version (the writer holds the row
-- lock), so a reader that remembers the version it applied sees every later commit, in whatever
-- order commits happen. No index: the refresh reads every account's (id, version) anyway, and an
-- index on a column every deal changes would cost each fill and close a secondary-index write.
ALTER TABLE `fx_account`
  ADD COLUMN `balanceVersion` BIGINT NOT NULL DEFAULT 0 AFTER `balance`;
