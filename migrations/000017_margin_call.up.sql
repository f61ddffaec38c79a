-- An account's margin call as the desk records it: since when the risk engine has seen its margin
-- level below its group's margin-call level; NULL while it is not in margin call. Set and cleared
-- in the transaction that writes its account.margin_call or account.margin_call_cleared event
-- (docs/architecture.md, «Events»); a new holder's risk engine starts from it.
ALTER TABLE `fx_account` ADD COLUMN `marginCallAt` DATETIME(3) NULL;
