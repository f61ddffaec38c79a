-- A trader's lists (positions, orders) read newest first, a page at a time, one account at a
-- time (book.ListPositions, book.ListOrders; docs/architecture.md, «Reading a trader's history»):
-- `accountId = ? [AND status = ?] [AND id < ?] ORDER BY id DESC LIMIT n`. These indexes answer
-- each of those as a backward range read that stops after n entries, whatever the account's
-- history; without them the lists joined fx_account on the user and sorted the user's whole
-- history. fx_deal already has (accountId, id). Adding an index is an in-place change on
-- MySQL 8 and MariaDB alike.
ALTER TABLE `fx_position`
  ADD KEY `idx_fx_position_account_list` (`accountId`, `status`, `id`),
  ADD KEY `idx_fx_position_account_id` (`accountId`, `id`);
ALTER TABLE `fx_order`
  ADD KEY `idx_fx_order_account_list` (`accountId`, `status`, `id`),
  ADD KEY `idx_fx_order_account_id` (`accountId`, `id`);
