ALTER TABLE tb_seckill_voucher DROP COLUMN buckets;
