-- Every payment received (issue 25): one row per provider transaction, so
-- money is never lost nor counted twice. kind says what it did: settled
-- (paid an unpaid order), late (after the order was cancelled: it turned
-- refunding), double (another transaction for an order already paid or
-- refunding) or unsold (for an order that failed). Every kind but settled is
-- owed back to the payer; reconcile counts them. The transaction id is
-- compared byte for byte (a provider's ids are case-sensitive).
CREATE TABLE IF NOT EXISTS tb_payment (
    transaction_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    order_id       BIGINT UNSIGNED NOT NULL,
    voucher_id     BIGINT UNSIGNED NOT NULL,
    amount         BIGINT          NOT NULL COMMENT 'fen',
    kind           VARCHAR(16)     NOT NULL COMMENT 'settled | late | double | unsold',
    received_at    DATETIME(6)     NOT NULL,
    PRIMARY KEY (transaction_id),
    KEY idx_payment_order (order_id),
    KEY idx_payment_voucher_kind (voucher_id, kind)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

--bun:split

-- Payments recorded on their orders before this table existed.
INSERT IGNORE INTO tb_payment (transaction_id, order_id, voucher_id, amount, kind, received_at)
SELECT o.transaction_id, o.id, o.voucher_id, COALESCE(v.pay_value, 0),
       CASE WHEN o.status IN (5, 6) THEN 'late' ELSE 'settled' END, COALESCE(o.pay_time, o.update_time)
FROM tb_voucher_order o LEFT JOIN tb_voucher v ON v.id = o.voucher_id
WHERE o.transaction_id IS NOT NULL;
