#!/usr/bin/env bash
# gofmt, go vet, staticcheck and `go mod tidy` (no diff) in every module
# given as an argument.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
export GOFLAGS=${GOFLAGS:--mod=mod}
fail=0
unformatted=$(gofmt -l $(git ls-files '*.go') || true)
if [ -n "$unformatted" ]; then
  echo "lint: gofmt -w these:"; echo "$unformatted"; fail=1
fi
for m in "$@"; do
  ( cd "$m"
    $GO vet ./... || exit 1
    $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... || exit 1
    cp go.mod /tmp/lint.go.mod.$$; cp go.sum /tmp/lint.go.sum.$$
    $GO mod tidy >/dev/null 2>&1 || true
    if ! cmp -s go.mod /tmp/lint.go.mod.$$ || ! cmp -s go.sum /tmp/lint.go.sum.$$; then
      echo "lint: $m: go mod tidy changes go.mod/go.sum; run it and commit"
      git --no-pager diff --stat -- go.mod go.sum || true
      cp /tmp/lint.go.mod.$$ go.mod; cp /tmp/lint.go.sum.$$ go.sum
      exit 1
    fi
  ) || { echo "lint: $m failed"; fail=1; }
done
exit $fail
