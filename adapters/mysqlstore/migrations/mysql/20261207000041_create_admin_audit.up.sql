-- The audit trail of admin actions (issue 40): who (admin_id), when
-- (create_time, UTC), what (action), on which sale (voucher_id) and what
-- changed (detail, a JSON object). The service only ever inserts here: no
-- route and no statement of the service updates or deletes a row. An action
-- that writes the database inserts its row in the same transaction.
-- idx_audit_voucher serves one sale's trail, newest first, in pages.
CREATE TABLE IF NOT EXISTS tb_admin_audit (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    admin_id    BIGINT UNSIGNED NOT NULL,
    action      VARCHAR(32)     NOT NULL,
    voucher_id  BIGINT UNSIGNED NOT NULL,
    detail      TEXT            NOT NULL COMMENT 'JSON object: what changed',
    create_time DATETIME(6)     NOT NULL,
    PRIMARY KEY (id),
    KEY idx_audit_voucher (voucher_id, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
