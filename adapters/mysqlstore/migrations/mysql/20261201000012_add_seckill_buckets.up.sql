-- How many buckets the Redis gate splits a sale's stock into (issue 12): 1,
-- the default, keeps every existing sale whole. Kept here so that a restore
-- from the database rebuilds a split sale as split.
ALTER TABLE tb_seckill_voucher ADD COLUMN buckets TINYINT UNSIGNED NOT NULL DEFAULT 1;
