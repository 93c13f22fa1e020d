#!/usr/bin/env bash
# The test Redis holds nothing a test wrote once the run is over.
#
#   .ci/leftovers.sh snapshot FILE   before the run: the test keys already there
#   .ci/leftovers.sh check FILE      after it: fails on any test key not in FILE
#
# Test keys are those under a test's own prefix t<12 hex>: (testenv.KeyPrefix)
# and hmdp login tokens; each test deletes its own when it ends. They are
# looked for in SECKILL_TEST_REDIS_URL's database and on every master of
# SECKILL_TEST_REDIS_CLUSTER_ADDRS. The snapshot keeps keys an earlier run or
# a developer left from being blamed on this one.
set -uo pipefail
mode=${1:?usage: leftovers.sh snapshot|check FILE}
file=${2:?usage: leftovers.sh snapshot|check FILE}

testkeys() {
	if [[ -n ${SECKILL_TEST_REDIS_URL:-} ]]; then
		redis-cli -u "$SECKILL_TEST_REDIS_URL" --scan 2>/dev/null | sed 's|^|redis |'
	fi
	if [[ -n ${SECKILL_TEST_REDIS_CLUSTER_ADDRS:-} ]]; then
		IFS=, read -ra seeds <<<"$SECKILL_TEST_REDIS_CLUSTER_ADDRS"
		local m
		for m in $(redis-cli -h "${seeds[0]%:*}" -p "${seeds[0]##*:}" cluster nodes 2>/dev/null |
			awk '$3 ~ /master/ && $3 !~ /fail/ {split($2, a, "@"); print a[1]}'); do
			redis-cli -h "${m%:*}" -p "${m##*:}" --scan 2>/dev/null | sed "s|^|$m |"
		done
	fi
}

case $mode in
snapshot)
	testkeys | grep -E ' (t[0-9a-f]{12}:|login:token:)' | sort >"$file"
	;;
check)
	left=$(testkeys | grep -E ' (t[0-9a-f]{12}:|login:token:)' | sort | comm -13 "$file" -)
	if [[ -n $left ]]; then
		echo "leftovers: the run left $(wc -l <<<"$left") test keys in the test Redis (where, key), e.g.:" >&2
		head -n 10 <<<"$left" | sed 's/^/  /' >&2
		exit 1
	fi
	echo "leftovers: the run left no test key in the test Redis"
	;;
*)
	echo "usage: leftovers.sh snapshot|check FILE" >&2
	exit 2
	;;
esac
