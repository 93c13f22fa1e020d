#!/usr/bin/env bash
# What one Redis shard does with the claim script (adapters/redisgate/claim.lua),
# measured with redis-benchmark (a C client, so the client costs the machine
# little): claims per second, not pipelined and pipelined, and the Redis CPU
# each claim costs (INFO cpu before and after), which is what bounds a shard
# that has a core to itself. docs/SCALING.md quotes its output.
#
#   docs/benchmarks/claim-shard.sh [port] [requests] [clients]
#
# port: a standalone Redis or one master of a Redis Cluster (default 6379);
# on a cluster node the voucher is one whose slot that node serves. Keys live
# under bench-shard:{N}: and are deleted at the end. Three answers of the
# script are measured: success (a new user each time: the whole script, the
# XADD included), duplicate (a buyer again) and sold_out (stock 0).
set -euo pipefail

port=${1:-6379}
n=${2:-200000}
clients=${3:-50}
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

here=$(cd "$(dirname "$0")" && pwd)
script=$here/../../adapters/redisgate/claim.lua
sha=$(cli script load "$(cat "$script")")

# A voucher's gate hash at key $1 with stock $2, if this node serves its slot
# (a cluster node answers MOVED for the others; a standalone node serves all).
gate() { ! cli hset "$1" stock "$2" begin 0 end 4102444800000 2>&1 | grep -q MOVED; }
vid=
for i in $(seq 1 500); do gate "bench-shard:{$i}:voucher" 1000000000000 && { vid=$i; break; }; done
[ -n "$vid" ] || { echo "no voucher id served by 127.0.0.1:$port" >&2; exit 1; }
sold=
for i in $(seq $((vid + 1)) 1000); do gate "bench-shard:{$i}:voucher" 0 && { sold=$i; break; }; done
tag="bench-shard:{$vid}:"
stag="bench-shard:{$sold}:"
cli hset "${tag}buyers" 7 1 >/dev/null
# One DEL per hash tag: keys of two slots in one DEL are CROSSSLOT on a cluster.
trap 'cli del "${tag}voucher" "${tag}buyers" "${tag}orders" >/dev/null; cli del "${stag}voucher" "${stag}buyers" "${stag}orders" >/dev/null' EXIT

cpu() { cli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'; }
# Microseconds Redis spent inside EVALSHA so far (the script alone, no I/O).
inscript() { cli info commandstats | tr -d '\r' | sed -n 's/^cmdstat_evalsha:.*usec=\([0-9]*\),.*/\1/p'; }

echo "redis 127.0.0.1:$port $(cli info server | tr -d '\r' | sed -n 's/^redis_version://p'), voucher $vid, $n requests, $clients clients, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-10s %-9s %12s %16s %16s\n' answer pipeline claims/s "redis cpu/claim" "in the script"
run() {
	local answer=$1 pipe=$2
	shift 2
	local before after rps sbefore safter
	before=$(cpu)
	sbefore=$(inscript)
	# -r: __rand_int__ is a fresh random number per placeholder and request,
	# so "success" is a new user (and order id) nearly every time.
	rps=$(redis-benchmark -h 127.0.0.1 -p "$port" -n "$n" -c "$clients" -P "$pipe" -r 1000000000 -q "$@" |
		tr '\r' '\n' | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -n 1)
	after=$(cpu)
	safter=$(inscript)
	printf '%-10s %-9s %12.0f %14.1f µs %14.1f µs\n' "$answer" "$pipe" "$rps" \
		"$(echo "($after - $before) * 1000000 / $n" | bc -l)" "$(echo "(${safter:-0} - ${sbefore:-0}) / $n" | bc -l)"
}
for pipe in 1 16; do
	run success "$pipe" evalsha "$sha" 3 "${tag}voucher" "${tag}buyers" "${tag}orders" \
		__rand_int__ __rand_int__ "$vid" 1 86400000 id __rand_int__ userId __rand_int__ voucherId "$vid"
	run duplicate "$pipe" evalsha "$sha" 3 "${tag}voucher" "${tag}buyers" "${tag}orders" \
		7 1 "$vid" 1 86400000 id 1 userId 7 voucherId "$vid"
	run sold_out "$pipe" evalsha "$sha" 3 "${stag}voucher" "${stag}buyers" "${stag}orders" \
		__rand_int__ __rand_int__ "$sold" 1 86400000 id __rand_int__ userId __rand_int__ voucherId "$sold"
done
echo "success entries written to ${tag}orders: $(cli xlen "${tag}orders")"
