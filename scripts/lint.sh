#!/usr/bin/env bash
# gofmt, go vet, staticcheck and `go mod tidy` (no diff) in every module
# given as an argument.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
fail=0
unformatted=$(gofmt -l $(git ls-files '*.go') || true)
if [ -n "$unformatted" ]; then
  echo "lint: gofmt -w these:"; echo "$unformatted"; fail=1
fi
if grep -n '^replace\|^\s*replace' $(git ls-files '*go.mod'); then
  echo "lint: a go.mod a user fetches has a replace directive (go install refuses it): use go.work"; fail=1
fi
# go mod tidy works on one module without the workspace, so the modules'
# requirements on each other (at the version they are released at) are
# served by a local proxy of this checkout (scripts/modproxy); go.sum
# lines of those are not compared (they change with every commit and are
# checked by scripts/install-test.sh).
proxy=$(mktemp -d)
trap 'rm -rf "$proxy"' EXIT
release=$(awk '$1 == "github.com/sqlcoord/sqlcoord" {print $2; exit}' cmd/sqlcoord/go.mod)
$GO run ./scripts/modproxy -out "$proxy" -version "$release" >/dev/null
upstream=$($GO env GOPROXY)
# Tidy in a module cache of its own: the default one may hold an earlier
# build of this checkout's modules at the same version. Third-party
# modules come from the default cache's downloads first.
cache=$($GO env GOMODCACHE)/cache/download
tidycache=$(mktemp -d)
trap 'rm -rf "$proxy"; chmod -R u+w "$tidycache" 2>/dev/null; rm -rf "$tidycache"' EXIT
for m in "$@"; do
  ( cd "$m"
    if [ "${TIDY:-}" != 1 ]; then
      $GO vet ./... || exit 1
      $GO vet -tags bench,full ./... || exit 1
      $GO run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags bench,full ./... || exit 1
    fi
    cp go.mod /tmp/lint.go.mod.$$; cp go.sum /tmp/lint.go.sum.$$
    GOMODCACHE="$tidycache" GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=github.com/sqlcoord GOPROXY="file://$proxy,file://$cache,$upstream" $GO mod tidy >/tmp/lint.tidy.$$ 2>&1 ||
      { cat /tmp/lint.tidy.$$; cp /tmp/lint.go.mod.$$ go.mod; cp /tmp/lint.go.sum.$$ go.sum; exit 1; }
    if [ "${TIDY:-}" = 1 ]; then # make tidy: keep what tidy wrote
      sed -i '/^github.com\/sqlcoord\//d' go.sum; exit 0
    fi
    if ! cmp -s go.mod /tmp/lint.go.mod.$$ || ! cmp -s <(grep -v '^github.com/sqlcoord/' go.sum) <(grep -v '^github.com/sqlcoord/' /tmp/lint.go.sum.$$); then
      echo "lint: $m: go mod tidy changes go.mod/go.sum; run it and commit"
      diff /tmp/lint.go.mod.$$ go.mod || true
      diff <(grep -v '^github.com/sqlcoord/' /tmp/lint.go.sum.$$) <(grep -v '^github.com/sqlcoord/' go.sum) | head -20 || true
      cp /tmp/lint.go.mod.$$ go.mod; cp /tmp/lint.go.sum.$$ go.sum
      exit 1
    fi
    cp /tmp/lint.go.sum.$$ go.sum
  ) || { echo "lint: $m failed"; fail=1; }
done
exit $fail
