-- An admin's sale controls (see the MySQL migration of the same name).
ALTER TABLE tb_seckill_voucher ADD COLUMN stock_added INTEGER NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
