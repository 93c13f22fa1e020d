#!/usr/bin/env bash
# Fails when the test Redis (SECKILL_TEST_REDIS_URL's database, and the
# cluster of SECKILL_TEST_REDIS_CLUSTER_ADDRS) holds keys a test wrote after
# the run: every test's keys live under its own prefix t<12 hex>: (testenv.KeyPrefix)
# or are hmdp login tokens, and each test deletes them when it ends. The
# test database is shared by every package and by every later run.
set -uo pipefail

found=0
check() { # label, redis-cli args...
	local label=$1; shift
	local keys
	keys=$(redis-cli "$@" --scan 2>/dev/null | grep -E '^(t[0-9a-f]{12}:|login:token:)' || true)
	if [[ -n $keys ]]; then
		echo "leftovers: $(wc -l <<<"$keys") test keys remain in $label, e.g.:" >&2
		head -n 5 <<<"$keys" | sed 's/^/  /' >&2
		found=1
	fi
}

if [[ -n ${SECKILL_TEST_REDIS_URL:-} ]]; then
	check "$SECKILL_TEST_REDIS_URL" -u "$SECKILL_TEST_REDIS_URL"
fi
if [[ -n ${SECKILL_TEST_REDIS_CLUSTER_ADDRS:-} ]]; then
	IFS=, read -ra seeds <<<"$SECKILL_TEST_REDIS_CLUSTER_ADDRS"
	# Every master's own keys (SCAN sees one node).
	masters=$(redis-cli -h "${seeds[0]%:*}" -p "${seeds[0]##*:}" cluster nodes 2>/dev/null | awk '$3 ~ /master/ && $3 !~ /fail/ {split($2, a, "@"); print a[1]}')
	for m in $masters; do check "cluster node $m" -h "${m%:*}" -p "${m##*:}"; done
fi
exit $found
