DROP TABLE IF EXISTS tb_sale_control_key;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN stock_added;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN paused;
