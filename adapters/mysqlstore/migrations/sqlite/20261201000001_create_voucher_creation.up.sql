-- See the MySQL migration of the same name: Idempotency-Key -> voucher.
CREATE TABLE IF NOT EXISTS tb_voucher_creation (
    idem_key    VARCHAR(128) PRIMARY KEY,
    voucher_id  INTEGER      NOT NULL,
    fingerprint CHAR(64)     NOT NULL,
    create_time DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP
);
