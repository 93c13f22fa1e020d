-- Back to the rule that every cancelled order frees its buyer's place.
ALTER TABLE tb_voucher_order
    DROP INDEX uk_holder_voucher,
    DROP COLUMN holder_id;

--bun:split

ALTER TABLE tb_voucher_order
    ADD COLUMN holder_id BIGINT UNSIGNED AS (CASE WHEN status IN (4, 5) THEN NULL ELSE user_id END) STORED,
    ADD UNIQUE KEY uk_holder_voucher (holder_id, voucher_id);

--bun:split

ALTER TABLE tb_voucher_order DROP COLUMN reclaimable;
