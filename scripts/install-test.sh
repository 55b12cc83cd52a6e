#!/usr/bin/env bash
# What a user does with a release, in an empty GOPATH and module cache:
# `go install …/cmd/sqlcoord@version`, and `go get` + `go build` of a new
# application — the program in README.md's "Install" section, extracted
# from it, so the README's first screen compiles. The release is this
# checkout: scripts/modproxy publishes every module at the version the
# modules require each other at into a local file:// proxy. Third-party
# modules come through the usual proxy (the local module cache first).
# Fails on a replace directive in a fetched go.mod, a module that does not
# build outside the workspace, or a README program that does not compile.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
GO=${GO:-go}
release=$(awk '$1 == "github.com/sqlcoord/sqlcoord" {print $2; exit}' cmd/sqlcoord/go.mod)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
$GO run ./scripts/modproxy -out "$work/proxy" -version "$release" >/dev/null
upstream=$($GO env GOPROXY)
cache=$($GO env GOMODCACHE)/cache/download
readme=$PWD/README.md
export GOPATH="$work/gopath" GOMODCACHE="$work/gopath/pkg/mod" GOWORK=off GOFLAGS= \
  GONOSUMDB=github.com/sqlcoord GOPROXY="file://$work/proxy,file://$cache,$upstream"

echo "install-test: go install github.com/sqlcoord/sqlcoord/cmd/sqlcoord@$release (empty module cache)"
$GO install "github.com/sqlcoord/sqlcoord/cmd/sqlcoord@$release"
"$GOPATH/bin/sqlcoord" version
size=$(stat -c %s "$GOPATH/bin/sqlcoord")
echo "install-test: the CLI is $((size / 1000000)) MB ($size bytes; benchmarks behind the build tag bench, Prometheus/NATS/Kafka behind full)"
# The guard is against a heavy dependency slipping into the default build
# (Prometheus, NATS and Kafka took it to 58 MB); the CLI's own code grows
# by a few hundred kB a release, hence the headroom.
if [ "$size" -gt 26000000 ]; then
  echo "install-test: the default CLI is over 26 MB" >&2
  exit 1
fi
if "$GO" version -m "$GOPATH/bin/sqlcoord" | grep -E 'prometheus|/natspub|/kafkapub'; then
  echo "install-test: the default CLI links a dependency that belongs behind the build tag full" >&2
  exit 1
fi
echo "install-test: go install -tags full …/cmd/sqlcoord@$release"
$GO install -tags full "github.com/sqlcoord/sqlcoord/cmd/sqlcoord@$release"
"$GOPATH/bin/sqlcoord" relay --help | grep -q -- --publisher
if "$GOPATH/bin/sqlcoord" bench growth >/dev/null 2>&1; then
  echo "install-test: the installed CLI runs benchmarks: they belong behind the build tag bench" >&2
  exit 1
fi

echo "install-test: go get + go build of README.md's program"
mkdir "$work/app"
cd "$work/app"
$GO mod init example.com/app >/dev/null 2>&1
# the first ```go block after the marker line in README.md
awk '/<!-- install-test: main.go -->/ {on = 1; next} on && /^```go/ {inblock = 1; next} inblock && /^```/ {exit} inblock {print}' "$readme" >main.go
if [ ! -s main.go ]; then
  echo "install-test: no program after <!-- install-test: main.go --> in README.md" >&2
  exit 1
fi
$GO get "github.com/sqlcoord/sqlcoord@$release" >/dev/null 2>&1
$GO mod tidy
$GO vet .
$GO build -o app .

# The test kit from a module outside the repository: the conformance
# suite on the kit's throwaway servers, through a dialect written there
# against the exported contract (scripts/kit/kit_test.go).
echo "install-test: sqlcoordtest from a module outside the repository"
mkdir "$work/kit"
cd "$work/kit"
$GO mod init example.com/sqlcoordkit >/dev/null 2>&1
cp "$repo/scripts/kit/kit_test.go" .
$GO get "github.com/sqlcoord/sqlcoord@$release" >/dev/null 2>&1
$GO mod tidy
$GO vet .
$GO test -count=1 -timeout 10m .
echo "install-test: ok"
