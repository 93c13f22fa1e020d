#!/usr/bin/env bash
# Start a local 3-master Redis Cluster on loopback from the machine's
# redis-server, for the cluster runs of the Redis contract suites. Idempotent:
# when the cluster already answers cluster_state:ok it does nothing. No
# persistence (--save '' --appendonly no): it is a test fixture.
#
#   REDIS_CLUSTER_PORTS="7001 7002 7003" (default)
#   REDIS_CLUSTER_DIR=/tmp/seckill-redis-cluster (default; one subdir per node)
#
# Prints the seed list to use as SECKILL_REDIS_CLUSTER_ADDRS /
# SECKILL_TEST_REDIS_CLUSTER_ADDRS on its last line.
set -euo pipefail

ports=(${REDIS_CLUSTER_PORTS:-7001 7002 7003})
dir=${REDIS_CLUSTER_DIR:-/tmp/seckill-redis-cluster}
first=${ports[0]}

addrs() { local IFS=,; local a=(); for p in "${ports[@]}"; do a+=("127.0.0.1:$p"); done; echo "${a[*]}"; }

healthy() {
	redis-cli -h 127.0.0.1 -p "$first" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok' &&
		[ "$(redis-cli -h 127.0.0.1 -p "$first" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" -ge "${#ports[@]}" ]
}

if healthy; then
	echo "redis cluster is up"
	addrs
	exit 0
fi

for p in "${ports[@]}"; do
	if redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1; then
		continue # already running (e.g. a previous run that did not finish create)
	fi
	mkdir -p "$dir/$p"
	# A node that is not running has no state worth keeping: a stale
	# nodes.conf from an earlier cluster would make create refuse it.
	rm -f "$dir/$p/nodes.conf"
	redis-server --daemonize yes --bind 127.0.0.1 --port "$p" \
		--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000 \
		--save '' --appendonly no --dir "$dir/$p" --logfile "$dir/$p/redis.log" \
		--pidfile "$dir/$p/redis.pid"
done

for p in "${ports[@]}"; do
	for _ in $(seq 1 50); do
		redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	redis-cli -h 127.0.0.1 -p "$p" ping >/dev/null
done

# Create only when no slot is assigned yet; a node that already knows slots
# (create half done, or a cluster still converging) is left to settle.
if [ "$(redis-cli -h 127.0.0.1 -p "$first" cluster info | tr -d '\r' | sed -n 's/^cluster_slots_assigned://p')" = "0" ]; then
	nodes=()
	for p in "${ports[@]}"; do nodes+=("127.0.0.1:$p"); done
	redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
fi

for _ in $(seq 1 100); do
	if healthy; then
		# Every node must agree, not just the first, before clients use it.
		ok=1
		for p in "${ports[@]}"; do
			redis-cli -h 127.0.0.1 -p "$p" cluster info | tr -d '\r' | grep -qx 'cluster_state:ok' || ok=0
		done
		if [ $ok = 1 ]; then
			echo "redis cluster is up"
			addrs
			exit 0
		fi
	fi
	sleep 0.2
done
echo "redis cluster did not reach cluster_state:ok" >&2
redis-cli -h 127.0.0.1 -p "$first" cluster info >&2 || true
exit 1
