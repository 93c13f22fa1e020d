-- The SQLite twin of migrations/mysql: same tables and columns, SQLite types.
-- Times are UTC text ('2006-01-02 15:04:05.999999+00:00', as Bun writes them),
-- so comparing them as strings orders them as times.

CREATE TABLE IF NOT EXISTS tb_voucher (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    shop_id      INTEGER,
    title        VARCHAR(255)  NOT NULL,
    sub_title    VARCHAR(255),
    rules        VARCHAR(1024),
    pay_value    INTEGER       NOT NULL CHECK (pay_value >= 0),
    actual_value INTEGER       NOT NULL,
    type         INTEGER       NOT NULL DEFAULT 0,
    status       INTEGER       NOT NULL DEFAULT 1,
    create_time  DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time  DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_voucher_shop_id ON tb_voucher (shop_id);

--bun:split

CREATE TABLE IF NOT EXISTS tb_seckill_voucher (
    voucher_id  INTEGER PRIMARY KEY REFERENCES tb_voucher (id) ON DELETE CASCADE,
    stock       INTEGER  NOT NULL CHECK (stock >= 0),
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    begin_time  DATETIME NOT NULL,
    end_time    DATETIME NOT NULL,
    update_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_seckill_end_time ON tb_seckill_voucher (end_time);

--bun:split

CREATE TABLE IF NOT EXISTS tb_voucher_order (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER  NOT NULL,
    voucher_id  INTEGER  NOT NULL,
    pay_type    INTEGER  NOT NULL DEFAULT 1,
    status      INTEGER  NOT NULL DEFAULT 1,
    create_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pay_time    DATETIME,
    use_time    DATETIME,
    refund_time DATETIME,
    update_time DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT uk_user_voucher UNIQUE (user_id, voucher_id)
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_order_voucher_id ON tb_voucher_order (voucher_id);

--bun:split

CREATE TABLE IF NOT EXISTS tb_voucher_order_failure (
    order_id    INTEGER PRIMARY KEY,
    user_id     INTEGER     NOT NULL,
    voucher_id  INTEGER     NOT NULL,
    reason      VARCHAR(32) NOT NULL,
    create_time DATETIME    NOT NULL DEFAULT CURRENT_TIMESTAMP
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_failure_voucher_id ON tb_voucher_order_failure (voucher_id);
