-- An admin's sale controls (see the MySQL migration of the same name).
ALTER TABLE tb_seckill_voucher ADD COLUMN stock_added INTEGER NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

--bun:split

-- The Idempotency-Keys of admins' sale controls: a retried request finds its
-- key and changes nothing (a retried addition of stock adds nothing).
CREATE TABLE tb_sale_control_key (
  idem_key TEXT NOT NULL PRIMARY KEY,
  voucher_id INTEGER NOT NULL,
  fingerprint TEXT NOT NULL
);
