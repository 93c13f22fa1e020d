-- An admin's retry of POST /voucher/seckill after a timeout or a 500 carries
-- the same Idempotency-Key: the key's row, written in the transaction that
-- creates the voucher, makes the retry return that voucher instead of
-- creating a second sale of the same stock. fingerprint (SHA-256 of the
-- request's voucher) tells a retry from a different voucher under a reused key.
CREATE TABLE IF NOT EXISTS tb_voucher_creation (
    idem_key    VARCHAR(128)    NOT NULL,
    voucher_id  BIGINT UNSIGNED NOT NULL,
    fingerprint CHAR(64)        NOT NULL,
    create_time DATETIME        NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (idem_key)
) ENGINE = InnoDB DEFAULT CHARSET = ascii COLLATE = ascii_bin;
