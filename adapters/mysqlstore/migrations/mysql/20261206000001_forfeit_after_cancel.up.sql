-- A cancelled or expired order forfeits its buyer's place (issue 37): it
-- still counts toward the one order per user per voucher, so a few accounts
-- cannot hold a sale's stock by letting orders lapse and claiming again.
-- reclaimable records, at the cancellation, whether the service let the
-- buyer claim again (SECKILL_RECLAIM_AFTER_CANCEL=true); holder_id, which the
-- unique key covers, is NULL only for such an order. Orders cancelled before
-- this migration were cancelled under the old rule, which freed the place.
ALTER TABLE tb_voucher_order
    ADD COLUMN reclaimable TINYINT UNSIGNED NOT NULL DEFAULT 0;

--bun:split

UPDATE tb_voucher_order SET reclaimable = 1 WHERE status IN (4, 5);

--bun:split

ALTER TABLE tb_voucher_order
    DROP INDEX uk_holder_voucher,
    DROP COLUMN holder_id;

--bun:split

ALTER TABLE tb_voucher_order
    ADD COLUMN holder_id BIGINT UNSIGNED AS (CASE WHEN status IN (4, 5) AND reclaimable = 1 THEN NULL ELSE user_id END) STORED,
    ADD UNIQUE KEY uk_holder_voucher (holder_id, voucher_id);
