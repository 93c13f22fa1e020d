-- Fails while a buyer holds more than one place in a sale (see the MySQL one).
DROP INDEX IF EXISTS uk_holder_voucher_slot;

--bun:split

CREATE UNIQUE INDEX uk_holder_voucher ON tb_voucher_order (user_id, voucher_id) WHERE status NOT IN (4, 5) OR reclaimable = 0;

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN slot;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN limit_per_user;
