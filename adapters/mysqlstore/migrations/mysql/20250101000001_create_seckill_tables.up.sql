-- Every DATETIME column holds UTC: the connection's time_zone is forced to
-- +00:00 and the driver reads and writes with loc=UTC (see OpenMySQL).

CREATE TABLE IF NOT EXISTS tb_voucher (
    id           BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
    shop_id      BIGINT UNSIGNED  NULL,
    title        VARCHAR(255)     NOT NULL,
    sub_title    VARCHAR(255)     NULL,
    rules        VARCHAR(1024)    NULL,
    pay_value    BIGINT UNSIGNED  NOT NULL,
    actual_value BIGINT           NOT NULL,
    type         TINYINT UNSIGNED NOT NULL DEFAULT 0 COMMENT '0 normal, 1 seckill',
    status       TINYINT UNSIGNED NOT NULL DEFAULT 1 COMMENT '1 on sale, 2 withdrawn, 3 expired',
    create_time  DATETIME         NOT NULL DEFAULT CURRENT_TIMESTAMP,
    update_time  DATETIME         NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    KEY idx_shop_id (shop_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

--bun:split

-- The stock row is what CreateBatch locks (SELECT ... FOR UPDATE): it
-- serialises the writers of one voucher. The CHECK is the last guard against
-- overselling should any code path ever skip the guarded decrement.
CREATE TABLE IF NOT EXISTS tb_seckill_voucher (
    voucher_id  BIGINT UNSIGNED NOT NULL,
    stock       INT             NOT NULL,
    create_time DATETIME        NOT NULL DEFAULT CURRENT_TIMESTAMP,
    begin_time  DATETIME(6)     NOT NULL,
    end_time    DATETIME(6)     NOT NULL,
    update_time DATETIME        NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (voucher_id),
    KEY idx_end_time (end_time),
    CONSTRAINT ck_seckill_stock_non_negative CHECK (stock >= 0),
    CONSTRAINT fk_seckill_voucher FOREIGN KEY (voucher_id) REFERENCES tb_voucher (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

--bun:split

-- id is not AUTO_INCREMENT: order IDs are issued by the service before the
-- order reaches the database, and the primary key on them makes a redelivered
-- order a no-op. uk_user_voucher is the database's one-order-per-user rule.
-- No foreign key to tb_voucher: orders are history and stay when a voucher goes.
CREATE TABLE IF NOT EXISTS tb_voucher_order (
    id          BIGINT           NOT NULL,
    user_id     BIGINT UNSIGNED  NOT NULL,
    voucher_id  BIGINT UNSIGNED  NOT NULL,
    pay_type    TINYINT UNSIGNED NOT NULL DEFAULT 1 COMMENT '1 balance, 2 alipay, 3 wechat',
    status      TINYINT UNSIGNED NOT NULL DEFAULT 1 COMMENT '1 unpaid, 2 paid, 3 used, 4 cancelled, 5 refunding, 6 refunded',
    create_time DATETIME         NOT NULL DEFAULT CURRENT_TIMESTAMP,
    pay_time    DATETIME         NULL,
    use_time    DATETIME         NULL,
    refund_time DATETIME         NULL,
    update_time DATETIME         NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    UNIQUE KEY uk_user_voucher (user_id, voucher_id),
    KEY idx_voucher_id (voucher_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

--bun:split

-- The visible terminal state of an order the database refused for good, so a
-- claimed order never just disappears. An order ID is in at most one of
-- tb_voucher_order and this table.
CREATE TABLE IF NOT EXISTS tb_voucher_order_failure (
    order_id    BIGINT          NOT NULL,
    user_id     BIGINT UNSIGNED NOT NULL,
    voucher_id  BIGINT UNSIGNED NOT NULL,
    reason      VARCHAR(32)     NOT NULL,
    create_time DATETIME        NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (order_id),
    KEY idx_voucher_id (voucher_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
