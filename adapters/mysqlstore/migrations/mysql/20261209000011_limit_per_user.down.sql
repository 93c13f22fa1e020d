-- Fails while a buyer holds more than one place in a sale: the one-order rule
-- cannot hold both.
ALTER TABLE tb_voucher_order
    DROP INDEX uk_holder_voucher_slot,
    ADD UNIQUE KEY uk_holder_voucher (holder_id, voucher_id);

--bun:split

ALTER TABLE tb_voucher_order
    DROP CONSTRAINT ck_order_slot,
    DROP COLUMN slot;

--bun:split

ALTER TABLE tb_seckill_voucher DROP COLUMN limit_per_user;
