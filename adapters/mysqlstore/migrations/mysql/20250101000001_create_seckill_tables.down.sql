DROP TABLE IF EXISTS tb_voucher_order_failure;

--bun:split

DROP TABLE IF EXISTS tb_voucher_order;

--bun:split

DROP TABLE IF EXISTS tb_seckill_voucher;

--bun:split

DROP TABLE IF EXISTS tb_voucher;
