-- A cancelled or expired order forfeits its buyer's place: see the MySQL
-- migration of the same name. The one-order-per-user index covers every
-- order but those cancelled with the place freed.
ALTER TABLE tb_voucher_order ADD COLUMN reclaimable INTEGER NOT NULL DEFAULT 0;

--bun:split

UPDATE tb_voucher_order SET reclaimable = 1 WHERE status IN (4, 5);

--bun:split

DROP INDEX IF EXISTS uk_holder_voucher;

--bun:split

CREATE UNIQUE INDEX uk_holder_voucher ON tb_voucher_order (user_id, voucher_id) WHERE status NOT IN (4, 5) OR reclaimable = 0;
