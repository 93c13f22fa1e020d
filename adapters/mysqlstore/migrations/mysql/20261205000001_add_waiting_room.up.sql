-- A sale's fair waiting room (issue 27): how long before the begin the
-- pre-queue opens, admissions per second, a pass's life and the margin of
-- passes over the stock. An admission rate of 0, the default, is no room:
-- every existing sale keeps behaving as before.
ALTER TABLE tb_seckill_voucher ADD COLUMN room_opens_before_s INT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_admit_rate INT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_pass_ttl_s INT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

ALTER TABLE tb_seckill_voucher ADD COLUMN room_margin INT UNSIGNED NOT NULL DEFAULT 0;
