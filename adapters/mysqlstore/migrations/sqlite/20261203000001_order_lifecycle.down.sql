DROP INDEX IF EXISTS idx_order_status_returned;

--bun:split

DROP INDEX IF EXISTS idx_order_status_deadline;

--bun:split

DROP INDEX IF EXISTS uk_holder_voucher;

--bun:split

CREATE UNIQUE INDEX IF NOT EXISTS uk_user_voucher ON tb_voucher_order (user_id, voucher_id);

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN returned;

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN transaction_id;

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN cancel_reason;

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN pay_deadline;
