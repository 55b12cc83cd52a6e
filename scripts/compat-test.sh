#!/usr/bin/env bash
# The previous release (the newest line of RELEASES) against the schema
# this checkout ships: its own conformance suite on a database this
# checkout's CLI migrated, and fenced writers of its API in processes
# SIGKILLed and SIGSTOPped, on PostgreSQL and MariaDB (compat/). The release
# is built as a user gets it: a local module proxy made from its recorded
# commit (scripts/modproxy -root), fetched in a module cache of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
read -r version commit _ < <(grep -v '^#' RELEASES | tail -1)
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  # a shallow clone has no history to build the release from: say so
  # loudly rather than fail a clone that cannot run it
  echo "compat-test: SKIPPED: the previous release's commit $commit ($version) is not in this clone (shallow?); git fetch --unshallow to run it" >&2
  exit 0
fi
work=$(mktemp -d)
cleanup() {
  git worktree remove --force "$work/prev" >/dev/null 2>&1 || true
  chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"
}
trap cleanup EXIT
git worktree add -q --detach "$work/prev" "$commit"
$GO run ./scripts/modproxy -root "$work/prev" -out "$work/proxy" -version "v$version" >/dev/null
( cd cmd/sqlcoord && $GO build -o "$work/sqlcoord" . )
cp -r compat "$work/compat"
cd "$work/compat"
upstream=$($GO env GOPROXY)
cache=$($GO env GOMODCACHE)/cache/download
export GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=github.com/sqlcoord GOSUMDB=off \
  GOMODCACHE="$work/modcache" GOPROXY="file://$work/proxy,file://$cache,$upstream"
$GO mod edit -require="github.com/sqlcoord/sqlcoord@v$version"
echo "compat-test: $version ($commit) on the schema of this checkout"
SQLCOORD_NEW_CLI="$work/sqlcoord" $GO test -count=1 -timeout 15m -v ./... | grep -E -- '--- |^(ok|FAIL|PASS)|_test.go:'
exit "${PIPESTATUS[0]}"
