-- The audit trail of admin actions: see the MySQL migration of the same name.
CREATE TABLE IF NOT EXISTS tb_admin_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    admin_id    INTEGER     NOT NULL,
    action      VARCHAR(32) NOT NULL,
    voucher_id  INTEGER     NOT NULL,
    detail      TEXT        NOT NULL,
    create_time DATETIME    NOT NULL
);

--bun:split

CREATE INDEX IF NOT EXISTS idx_audit_voucher ON tb_admin_audit (voucher_id, id);
