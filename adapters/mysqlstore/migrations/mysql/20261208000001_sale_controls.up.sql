-- An admin's sale controls (issue 40): every unit added to a live sale since
-- its creation (the gate keeps the same total, so an addition reaches it once
-- whatever the retries), and whether the sale is paused. 0 and 0, the
-- defaults, are every existing sale as it was.
ALTER TABLE tb_seckill_voucher ADD COLUMN stock_added INT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN paused TINYINT(1) NOT NULL DEFAULT 0;
