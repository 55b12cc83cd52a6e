#!/usr/bin/env bash
# Runs every module's tests side by side (go test flags as arguments),
# each into its own log, and fails if any fails. The library's suite is
# the long one; the others overlap with it.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
logs=$(mktemp -d)
pids=()
mods=(. cmd/sqlcoord console/browsertest bench outbox/natspub outbox/kafkapub)
for m in "${mods[@]}"; do
  log="$logs/$(echo "$m" | tr / _).log"
  ( cd "$m" && $GO test -tags bench,full "$@" ./... ) >"$log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!mods[@]}"; do
  if wait "${pids[$i]}"; then
    echo "== ${mods[$i]}: ok"
    grep -E '^(ok|---)' "$logs/$(echo "${mods[$i]}" | tr / _).log" | sed 's/^/   /'
  else
    status=1
    echo "== ${mods[$i]}: FAILED"
    grep -v 'level=\(WARN\|INFO\|ERROR\)' "$logs/$(echo "${mods[$i]}" | tr / _).log" | tail -150
  fi
done
exit $status
