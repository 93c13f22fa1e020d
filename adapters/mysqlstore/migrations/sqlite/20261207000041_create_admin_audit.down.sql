DROP TABLE IF EXISTS tb_admin_audit;
