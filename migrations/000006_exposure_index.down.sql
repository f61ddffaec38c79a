ALTER TABLE `fx_position`
  ADD KEY `idx_fx_position_account` (`accountId`, `status`, `symbol`),
  DROP KEY `idx_fx_position_exposure`;
