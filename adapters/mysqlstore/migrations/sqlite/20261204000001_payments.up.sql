-- Every payment received: see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_payment (
    transaction_id VARCHAR(64) PRIMARY KEY,
    order_id       INTEGER  NOT NULL,
    voucher_id     INTEGER  NOT NULL,
    amount         INTEGER  NOT NULL,
    kind           VARCHAR(16) NOT NULL,
    received_at    DATETIME NOT NULL
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_payment_order ON tb_payment (order_id);

--bun:split

CREATE INDEX IF NOT EXISTS idx_payment_voucher_kind ON tb_payment (voucher_id, kind);

--bun:split

INSERT OR IGNORE INTO tb_payment (transaction_id, order_id, voucher_id, amount, kind, received_at)
SELECT o.transaction_id, o.id, o.voucher_id, COALESCE(v.pay_value, 0),
       CASE WHEN o.status IN (5, 6) THEN 'late' ELSE 'settled' END, COALESCE(o.pay_time, o.update_time)
FROM tb_voucher_order o LEFT JOIN tb_voucher v ON v.id = o.voucher_id
WHERE o.transaction_id IS NOT NULL;
