-- Fails while a buyer holds a cancelled order and a later one for the same
-- voucher: the old rule cannot hold both.
ALTER TABLE tb_voucher_order
    DROP INDEX idx_status_returned,
    DROP INDEX idx_status_deadline,
    DROP INDEX uk_holder_voucher,
    ADD UNIQUE KEY uk_user_voucher (user_id, voucher_id);

--bun:split

ALTER TABLE tb_voucher_order
    DROP COLUMN holder_id,
    DROP COLUMN returned,
    DROP COLUMN transaction_id,
    DROP COLUMN cancel_reason,
    DROP COLUMN pay_deadline;
