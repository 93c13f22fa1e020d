-- A sale's fair waiting room (see the MySQL migration of the same name).
ALTER TABLE tb_seckill_voucher ADD COLUMN room_opens_before_s INTEGER NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_admit_rate INTEGER NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_pass_ttl_s INTEGER NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_margin INTEGER NOT NULL DEFAULT 0;
