-- Every fill sums the account's open positions per symbol and side (the exposures its margin
-- check needs) inside its transaction, with the account row locked. With the summed columns in
-- the index the sum reads the index range alone instead of one clustered-index look-up per
-- open position, so an account with hundreds of positions does not make each of its fills, and
-- everything queued behind its lock, slower. It replaces idx_fx_position_account, whose columns
-- it starts with (the account foreign key uses it the same way).
ALTER TABLE `fx_position`
  ADD KEY `idx_fx_position_exposure` (`accountId`, `status`, `symbol`, `side`, `volume`, `openPrice`),
  DROP KEY `idx_fx_position_account`;
