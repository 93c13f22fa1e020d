-- An admin's sale controls (issue 40): every unit added to a live sale since
-- its creation (the gate keeps the same total, so an addition reaches it once
-- whatever the retries), and whether the sale is paused. 0 and 0, the
-- defaults, are every existing sale as it was.
ALTER TABLE tb_seckill_voucher ADD COLUMN stock_added INT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN paused TINYINT(1) NOT NULL DEFAULT 0;

--bun:split

-- The Idempotency-Keys of admins' sale controls: a retried request finds its
-- key and changes nothing (a retried addition of stock adds nothing).
CREATE TABLE tb_sale_control_key (
  idem_key VARCHAR(128) NOT NULL PRIMARY KEY,
  voucher_id BIGINT UNSIGNED NOT NULL,
  fingerprint VARCHAR(128) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
