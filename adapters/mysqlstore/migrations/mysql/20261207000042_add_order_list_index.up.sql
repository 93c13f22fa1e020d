-- A sale's orders listed by state, in pages by id (GET
-- /admin/vouchers/{id}/orders and its CSV export): each page is one range
-- read of this index per status, whatever the sale's size or how rare the
-- state. Without it a page of a rare state would scan the whole sale.
ALTER TABLE tb_voucher_order ADD KEY idx_voucher_status_id (voucher_id, status, id);
