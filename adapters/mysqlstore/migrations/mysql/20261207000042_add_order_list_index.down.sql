ALTER TABLE tb_voucher_order DROP INDEX idx_voucher_status_id;
