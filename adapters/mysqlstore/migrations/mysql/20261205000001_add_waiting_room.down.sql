ALTER TABLE tb_seckill_voucher DROP COLUMN room_opens_before_s;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN room_admit_rate;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN room_pass_ttl_s;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN room_margin;
