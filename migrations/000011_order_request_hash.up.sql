-- A requestNonce binds the request it came with (DESIGN §13): `requestHash` is the SHA-256, in
-- hex, of the order as submitted — account, symbol, side, type, volume, price, sl, tp,
-- timeInForce, expiresAt — so a retry is told from another order sent under the same nonce
-- (422 idempotency_key_reused) even after the row changed (a venue fill rewrites `volume`).
-- NULL on orders written before this column and on orders sent without a nonce: a retry of
-- such an order replays as before.
ALTER TABLE `fx_order`
  ADD COLUMN `requestHash` CHAR(64) NULL AFTER `requestNonce`;
