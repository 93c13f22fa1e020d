-- A sale's limit per user, and which of its buyer's places an order holds:
-- see the MySQL migration of the same name. The unique index over the orders
-- holding a place gains the slot.
ALTER TABLE tb_seckill_voucher ADD COLUMN limit_per_user INTEGER NOT NULL DEFAULT 1;

--bun:split

ALTER TABLE tb_voucher_order ADD COLUMN slot INTEGER NOT NULL DEFAULT 1 CHECK (slot BETWEEN 1 AND 10);

--bun:split

DROP INDEX IF EXISTS uk_holder_voucher;

--bun:split

CREATE UNIQUE INDEX uk_holder_voucher_slot ON tb_voucher_order (user_id, voucher_id, slot) WHERE status NOT IN (4, 5) OR reclaimable = 0;
