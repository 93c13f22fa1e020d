DROP INDEX IF EXISTS uk_holder_voucher;

--bun:split

CREATE UNIQUE INDEX uk_holder_voucher ON tb_voucher_order (user_id, voucher_id) WHERE status NOT IN (4, 5);

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN reclaimable;
