-- The order lifecycle (issue 25): an order must be paid by pay_deadline
-- (NULL: never expires) or it is cancelled and its unit returned.
-- status keeps hmdp's codes: 1 unpaid, 2 paid, 4 cancelled, 5 refunding.
-- returned records that the gate (Redis) has a cancelled order's unit back:
-- the database's stock gets it in the cancelling transaction, the gate after,
-- so a crash between the two leaves returned = 0 for the next pass to finish.
-- holder_id is the buyer while the order holds its unit (NULL once cancelled):
-- the one-order-per-user rule now covers the orders that hold a unit, so a
-- buyer whose order was cancelled may claim again and both orders stay on
-- record.
ALTER TABLE tb_voucher_order
    ADD COLUMN pay_deadline   DATETIME(6)      NULL,
    ADD COLUMN cancel_reason  VARCHAR(16)      NULL COMMENT 'expired | cancelled',
    ADD COLUMN transaction_id VARCHAR(64)      NULL COMMENT 'the payment provider''s',
    ADD COLUMN returned       TINYINT UNSIGNED NOT NULL DEFAULT 0,
    ADD COLUMN holder_id      BIGINT UNSIGNED AS (CASE WHEN status IN (4, 5) THEN NULL ELSE user_id END) STORED;

--bun:split

-- idx_status_deadline serves the expiry scan (status = 1 AND pay_deadline <=
-- now), idx_status_returned the pass that finishes returns.
ALTER TABLE tb_voucher_order
    DROP INDEX uk_user_voucher,
    ADD UNIQUE KEY uk_holder_voucher (holder_id, voucher_id),
    ADD KEY idx_status_deadline (status, pay_deadline),
    ADD KEY idx_status_returned (status, returned);
