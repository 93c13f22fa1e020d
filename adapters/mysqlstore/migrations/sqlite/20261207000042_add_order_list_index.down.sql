DROP INDEX IF EXISTS idx_voucher_status_id;
