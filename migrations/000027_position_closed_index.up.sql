-- The positions an account held at a past instant are those open now and those closed since
-- (docs/eod.md, «Statements»). Through idx_fx_position_exposure that is every position the
-- account ever had, each looked up in the table for its times; on this index it is two ranges of
-- the account's entries — OPEN, and CLOSED from the instant on — with openedAt checked in the
-- index, so only the positions open then are read. A statement's open positions and a day
-- frozen after its rollover both read them so. Adding an index is an in-place change on MySQL 8
-- and MariaDB alike.
ALTER TABLE `fx_position`
  ADD KEY `idx_fx_position_account_closed` (`accountId`, `status`, `closedAt`, `openedAt`);
