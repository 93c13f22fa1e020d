DROP TABLE IF EXISTS tb_deployment;
