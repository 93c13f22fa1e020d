#!/usr/bin/env bash
# CI: run the built image as a container against the real Redis and MariaDB
# and drive a sale through it, as a user of the image would: the service
# starts as the image's non-root user, an admin creates a voucher, a buyer
# claims it, the order reaches MySQL; then SIGTERM drains and stops it. No
# container engine runs here: `buildah run --isolation chroot --network
# host` runs the image's file system and user (podman run fails here).
#
# Needs SECKILL_TEST_REDIS_URL and SECKILL_TEST_MYSQL_DSN, and the image
# .ci/image.sh built.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILDAH=${BUILDAH:-buildah --storage-driver vfs}
IMAGE=${IMAGE:-localhost/seckill:dev}
: "${SECKILL_TEST_REDIS_URL:?SECKILL_TEST_REDIS_URL names the Redis the container uses}"
: "${SECKILL_TEST_MYSQL_DSN:?SECKILL_TEST_MYSQL_DSN names the MariaDB the container uses}"

fail() { echo "image run: $*" >&2; [ -f "${work:-}/log" ] && tail -n 20 "$work/log" >&2; exit 1; }
work=$(mktemp -d)
id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
prefix="img$id:"
db="seckill_img_$id"
dsn=$(sed -E "s|\)/[^?]*|)/$db|" <<<"$SECKILL_TEST_MYSQL_DSN")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
host_bin=bin/seckill-static # the binary the image holds, built by make image
ctr=""
pid=""
cleanup() {
	[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
	[ -n "$ctr" ] && $BUILDAH rm "$ctr" >/dev/null 2>&1 || true
	redis-cli -u "$SECKILL_TEST_REDIS_URL" --scan --pattern "$prefix*" | xargs -r redis-cli -u "$SECKILL_TEST_REDIS_URL" del >/dev/null 2>&1 || true
	for t in ${tokens:-}; do redis-cli -u "$SECKILL_TEST_REDIS_URL" del "login:token:$t" >/dev/null 2>&1 || true; done
	mariadb -h 127.0.0.1 -P 3306 -uroot -e "DROP DATABASE IF EXISTS \`$db\`" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

mariadb -h 127.0.0.1 -P 3306 -uroot -e "CREATE DATABASE \`$db\`"
ctr=$($BUILDAH from -q "$IMAGE")
user=$($BUILDAH inspect --type container --format '{{.OCIv1.Config.User}}' "$ctr")
$BUILDAH run --isolation chroot --network host --user "$user" \
	-e "SECKILL_REDIS_URL=$SECKILL_TEST_REDIS_URL" -e "SECKILL_MYSQL_DSN=$dsn" \
	-e "SECKILL_HTTP_ADDR=127.0.0.1:$port" -e SECKILL_METRICS_ADDR=off -e "SECKILL_KEY_PREFIX=$prefix" \
	-e SECKILL_ADMIN_USERS=1 -e "SECKILL_CONSUMER=image-$id" -e SECKILL_SHUTDOWN_TIMEOUT=5s \
	"$ctr" /seckill serve >"$work/log" 2>&1 &
pid=$!

for _ in $(seq 1 120); do
	curl -fsS "$base/readyz" >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "the container exited at start"
	sleep 0.5
done
curl -fsS "$base/readyz" >/dev/null || fail "the container never became ready on $base"
grep -q '"message":"seckill listening"' "$work/log" || fail "no start line"
echo "image run: $IMAGE serves on $base as user $user"

# Logins are the shop's: minted on the same Redis, by the binary the image holds.
tokens=$(SECKILL_REDIS_URL=$SECKILL_TEST_REDIS_URL "$host_bin" token --user 1 --count 2 2>/dev/null)
admin=$(sed -n 1p <<<"$tokens")
buyer=$(sed -n 2p <<<"$tokens")
data() { python3 -c 'import json,sys; e = json.load(sys.stdin); print(e.get("data") if e.get("success") else "FAIL " + json.dumps(e))'; }
begin=$(date -u -d '-1 minute' +%Y-%m-%dT%H:%M:%SZ)
end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
voucher=$(curl -fsS -X POST "$base/voucher/seckill" -H "authorization: $admin" -H 'Content-Type: application/json' \
	-d "{\"shopId\":1,\"title\":\"image\",\"payValue\":100,\"actualValue\":200,\"type\":1,\"stock\":5,\"beginTime\":\"$begin\",\"endTime\":\"$end\"}" | data)
[[ $voucher =~ ^[0-9]+$ ]] || fail "create a voucher: $voucher"
order=$(curl -fsS -X POST "$base/voucher-order/seckill/$voucher" -H "authorization: $buyer" | data)
[[ $order =~ ^[0-9]+$ ]] || fail "claim: $order"
state=""
for _ in $(seq 1 50); do
	state=$(curl -fsS "$base/voucher-order/$order" -H "authorization: $buyer" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["state"])')
	[ "$state" = created ] && break
	sleep 0.2
done
[ "$state" = created ] || fail "order $order is $state, want created (in MySQL)"
rows=$(mariadb -h 127.0.0.1 -P 3306 -uroot -N -e "SELECT COUNT(*) FROM \`$db\`.tb_voucher_order WHERE id = $order")
[ "$rows" = 1 ] || fail "order $order is not in MySQL"
echo "image run: voucher $voucher, order $order created in MySQL"

grep -q 'the open-file limit cuts the API' "$work/log" ||
	fail "file limit $(grep -o '"file_limit":[0-9]*' "$work/log" | head -1) and no warning that it cuts the connection cap"

# SIGTERM, as a runtime delivers it to the container's PID 1 (the service:
# ENTRYPOINT in exec form). buildah run does not forward a signal it gets
# itself (it kills its child), so it goes to the service's process.
svc=$(pgrep -fx '/seckill serve' | head -n 1)
[ -n "$svc" ] || fail "no /seckill serve process"
kill -TERM "$svc"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then fail "still running 10 s after SIGTERM"; fi
wait "$pid" || true
pid=""
tail -n 1 "$work/log" | grep -q '"message":"stopped"' || fail "SIGTERM did not end in a drained stop"
echo "image run: SIGTERM drained and stopped it"
