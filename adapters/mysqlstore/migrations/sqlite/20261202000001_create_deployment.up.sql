-- The deployment's identity: see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_deployment (
    id            INTEGER  NOT NULL PRIMARY KEY CHECK (id = 1),
    deployment_id TEXT     NOT NULL,
    create_time   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
