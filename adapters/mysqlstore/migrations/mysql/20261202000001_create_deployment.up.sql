-- The deployment's identity (issue 24): a random id written by the first start
-- and stored in Redis too, under <SECKILL_KEY_PREFIX>deployment. A start whose
-- Redis prefix carries another database's id is refused, so two deployments
-- (staging and production) on one Redis prefix cannot take each other's orders.
-- One row: id is always 1.
CREATE TABLE IF NOT EXISTS tb_deployment (
    id            TINYINT UNSIGNED NOT NULL,
    deployment_id VARCHAR(64)      NOT NULL,
    create_time   DATETIME         NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    CONSTRAINT ck_deployment_one_row CHECK (id = 1)
) ENGINE = InnoDB DEFAULT CHARSET = ascii COLLATE = ascii_bin;
