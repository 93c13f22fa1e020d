-- A sale's orders by state, in pages by id: see the MySQL migration of the
-- same name.
CREATE INDEX IF NOT EXISTS idx_voucher_status_id ON tb_voucher_order (voucher_id, status, id);
