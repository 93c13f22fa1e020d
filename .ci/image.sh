#!/usr/bin/env bash
# CI: build the container image (make image) and check what is in it, as far
# as a machine without a container engine allows: the files of its one layer,
# that its binary is static and built as the Makefile says, that it runs as a
# non-root user, and that the binary the image would run answers on this host.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILDAH=${BUILDAH:-buildah --storage-driver vfs}
IMAGE=${IMAGE:-localhost/seckill:dev}

fail() { echo "image: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

make --no-print-directory image BUILDAH="$BUILDAH" IMAGE="$IMAGE" >/dev/null 2>"$work/build.log" ||
	{ cat "$work/build.log" >&2; fail "make image failed"; }

cfg() { $BUILDAH inspect --type image --format "$1" "$IMAGE"; }
user=$(cfg '{{.OCIv1.Config.User}}')
# buildah 1.28's templates have no json: a list prints as [a b].
entrypoint=$(cfg '{{.OCIv1.Config.Entrypoint}}')
cmd=$(cfg '{{.OCIv1.Config.Cmd}}')
env=$(cfg '{{range .OCIv1.Config.Env}}{{println .}}{{end}}')
echo "image $IMAGE: user $user, entrypoint $entrypoint, cmd $cmd"
uid=${user%%:*}
[[ $uid =~ ^[0-9]+$ && $uid -ne 0 ]] || fail "runs as user \"$user\"; want a numeric non-root UID"
[ "$entrypoint" = '[/seckill]' ] || fail "entrypoint $entrypoint, want [/seckill]"
[ "$cmd" = '[serve]' ] || fail "cmd $cmd, want [serve]"
grep -qx 'SECKILL_HTTP_ADDR=0.0.0.0:8080' <<<"$env" || fail "SECKILL_HTTP_ADDR is not 0.0.0.0:8080 in: $env"

# The image as an OCI archive: its one layer is a tar of the whole file system.
$BUILDAH push -q "$IMAGE" "oci-archive:$work/image.tar" >/dev/null
mkdir "$work/oci" "$work/root"
tar -xf "$work/image.tar" -C "$work/oci"
manifest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' "$work/oci/index.json")
layers=$(python3 -c 'import json,sys; [print(l["digest"].split(":")[1]) for l in json.load(open(sys.argv[1]))["layers"]]' "$work/oci/blobs/sha256/$manifest")
echo "contents:"
for l in $layers; do
	tar -tvzf "$work/oci/blobs/sha256/$l" | sed 's/^/  /'
	tar -xzf "$work/oci/blobs/sha256/$l" -C "$work/root"
done
# Exactly these paths and nothing else: a shell, a package database or a
# stray build file in the image fails here.
got=$(for l in $layers; do tar -tzf "$work/oci/blobs/sha256/$l"; done | sed 's:^\./::; s:/$::' | grep -v '^$' | sort -u | tr '\n' ' ')
want="data etc etc/group etc/passwd seckill "
[ "$got" = "$want" ] || fail "contents are \"$got\", want \"$want\""
owner=$(for l in $layers; do tar -tvzf "$work/oci/blobs/sha256/$l"; done | awk '$NF ~ /^(\.\/)?data\/?$/ {print $2}')
[ "$owner" = "65532/65532" ] || fail "/data is owned by $owner, want 65532/65532 (the only writable place)"

bin="$work/root/seckill"
desc=$(file -b "$bin")
echo "seckill: $desc"
[[ $desc == *"statically linked"* ]] || fail "the binary is not static: $desc"
info=$(go version -m "$bin")
for want in 'CGO_ENABLED=0' '-trimpath=true' '-tags=timetzdata'; do
	grep -qF -- "$want" <<<"$info" || fail "go version -m says no $want:"$'\n'"$info"
done
toolchain=$(sed -n 's/^toolchain //p' go.mod)
built=$(head -n 1 <<<"$info" | awk '{print $2}')
[ -z "$toolchain" ] || [ "$built" = "$toolchain" ] || fail "built with $built, go.mod names $toolchain"
echo "built with $built, CGO_ENABLED=0, -trimpath, zoneinfo embedded"

# The entrypoint answers. `version` once the binary has it; `help` always.
usage=$("$bin" help) || fail "seckill help failed"
if grep -qE '^\s+version\b' <<<"$usage"; then
	"$bin" version || fail "seckill version failed"
else
	grep -q '^usage: seckill' <<<"$usage" || fail "seckill help printed: $usage"
	echo "seckill help answers (this binary has no version command)"
fi
# Each build leaves the previous image untagged: drop those, not to fill the
# CI machine's storage run after run.
$BUILDAH rmi --prune >/dev/null 2>&1 || true
echo "image $IMAGE ok"
