-- A sale's limit per user (issue 40): a user may hold up to limit_per_user
-- orders of the sale, one unit each. 1, the default, is hmdp's one order per
-- user per voucher, so every existing sale is as it was.
ALTER TABLE tb_seckill_voucher ADD COLUMN limit_per_user INT UNSIGNED NOT NULL DEFAULT 1;

--bun:split

-- slot is which of its buyer's places in the sale an order holds,
-- 1..limit_per_user; the unique key over (holder_id, voucher_id, slot) is the
-- database's own bound on a user's places, as (holder_id, voucher_id) was on
-- the one order: a place too many needs a slot already held. An order
-- written without a slot (every existing one, and one inserted by the
-- original Java app) holds slot 1, so for a limit of 1 the key is the old
-- rule. The CHECK bounds it by domain.MaxLimitPerUser; the service keeps a
-- slot within its sale's limit (domain.PlanBatch).
ALTER TABLE tb_voucher_order
    ADD COLUMN slot TINYINT UNSIGNED NOT NULL DEFAULT 1,
    ADD CONSTRAINT ck_order_slot CHECK (slot BETWEEN 1 AND 10);

--bun:split

ALTER TABLE tb_voucher_order
    DROP INDEX uk_holder_voucher,
    ADD UNIQUE KEY uk_holder_voucher_slot (holder_id, voucher_id, slot);
