#!/usr/bin/env bash
# govulncheck against a pinned, locally built copy of the Go vulnerability
# database, so the scan needs only the module proxy (no vuln.go.dev) and gives
# the same answer on every run until someone moves the pins on purpose.
# A vulnerable function that the code calls fails the build (exit 3); an
# imported-but-uncalled one is only listed by `-show verbose`.
#
# Move the pins together, e.g.:
#   go list -m golang.org/x/vulndb@latest   (a pseudo-version: the repository has no tags)
#   go list -m golang.org/x/vuln@latest
set -euo pipefail
cd "$(dirname "$0")/.."

VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
GO=${GO:-go}
# Scan with the toolchain go.mod pins (its `toolchain` line), which is what
# CI builds with; a machine-wide GOTOOLCHAIN=local would scan an older
# standard library than the one shipped.
export GOTOOLCHAIN=auto

# Tools are built outside this module: their requirements stay out of go.mod,
# and GOFLAGS such as -mod=vendor cannot leak into them.
tools() { (cd / && GOFLAGS= "$GO" "$@"); }

src=$(tools mod download -json "golang.org/x/vulndb@${VULNDB_VERSION}" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src/data/osv" ]; then
	echo "govulncheck: golang.org/x/vulndb@${VULNDB_VERSION} has no data/osv" >&2
	exit 1
fi

db=$(mktemp -d)
trap 'rm -rf "$db"' EXIT
tools run "golang.org/x/vulndb/cmd/indexdb@${VULNDB_VERSION}" -vulns "$src/data/osv" -out "$db"

echo "govulncheck ${GOVULNCHECK_VERSION}, vulndb ${VULNDB_VERSION}, $("$GO" version)"
"$GO" run "golang.org/x/vuln/cmd/govulncheck@${GOVULNCHECK_VERSION}" -db "file://$db" "$@" ./...
