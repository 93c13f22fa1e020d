DROP TABLE IF EXISTS tb_voucher_creation;
