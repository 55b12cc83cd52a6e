#!/usr/bin/env bash
# `make test` N times in a row (default 5) on a clean clone of HEAD, each
# with two CPU-burning processes beside it: what a test's waits must hold
# up against (they are liveness bounds derived from its TTLs, never a guess
# of how long something takes). Logs and a summary go to DIR (default a
# temporary directory); exits non-zero if any run failed.
#   scripts/loaded-test.sh [N] [DIR]
set -uo pipefail
n=${1:-5}
out=${2:-$(mktemp -d)}
repo=$(cd "$(dirname "$0")/.." && pwd)
clone=$(mktemp -d)
trap 'rm -rf "$clone"' EXIT
git clone -q "$repo" "$clone/sqlcoord" && cd "$clone/sqlcoord" || exit 1
mkdir -p "$out"
git log --oneline -1 | tee "$out/commit"
failed=0
for i in $(seq 1 "$n"); do
  (while :; do :; done) & b1=$!
  (while :; do :; done) & b2=$!
  start=$(date +%s)
  make test >"$out/run$i.log" 2>&1
  rc=$?
  kill "$b1" "$b2"
  [ "$rc" = 0 ] || failed=$((failed + 1))
  echo "run $i: exit $rc in $(($(date +%s) - start)) s" | tee -a "$out/summary"
done
echo "$((n - failed)) of $n passed; logs in $out" | tee -a "$out/summary"
[ "$failed" = 0 ]
