-- DROP INDEX ... ON, not ALTER TABLE ... DROP: dropping an index destroys no
-- row, and Rollback's data-loss guard reads ALTER TABLE ... DROP as a column.
DROP INDEX idx_voucher_status_id ON tb_voucher_order;
