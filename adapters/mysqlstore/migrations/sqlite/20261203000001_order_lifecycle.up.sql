-- The order lifecycle: see the MySQL migration of the same name. SQLite
-- cannot drop a table's UNIQUE constraint, so the table is rebuilt; the
-- one-order-per-user rule becomes a partial unique index over the orders
-- that hold a unit.
CREATE TABLE tb_voucher_order_lifecycle (
    id             INTEGER PRIMARY KEY,
    user_id        INTEGER  NOT NULL,
    voucher_id     INTEGER  NOT NULL,
    pay_type       INTEGER  NOT NULL DEFAULT 1,
    status         INTEGER  NOT NULL DEFAULT 1,
    create_time    DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pay_time       DATETIME,
    use_time       DATETIME,
    refund_time    DATETIME,
    update_time    DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pay_deadline   DATETIME,
    cancel_reason  VARCHAR(16),
    transaction_id VARCHAR(64),
    returned       INTEGER  NOT NULL DEFAULT 0
);

--bun:split

INSERT INTO tb_voucher_order_lifecycle (id, user_id, voucher_id, pay_type, status, create_time, pay_time, use_time, refund_time, update_time)
SELECT id, user_id, voucher_id, pay_type, status, create_time, pay_time, use_time, refund_time, update_time FROM tb_voucher_order;

--bun:split

DROP TABLE tb_voucher_order;

--bun:split

ALTER TABLE tb_voucher_order_lifecycle RENAME TO tb_voucher_order;

--bun:split

CREATE INDEX IF NOT EXISTS idx_order_voucher_id ON tb_voucher_order (voucher_id);

--bun:split

CREATE UNIQUE INDEX IF NOT EXISTS uk_holder_voucher ON tb_voucher_order (user_id, voucher_id) WHERE status NOT IN (4, 5);

--bun:split

CREATE INDEX IF NOT EXISTS idx_order_status_deadline ON tb_voucher_order (status, pay_deadline);

--bun:split

CREATE INDEX IF NOT EXISTS idx_order_status_returned ON tb_voucher_order (status, returned);
