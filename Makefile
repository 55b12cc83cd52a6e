# sqlcoord — see README.md. `make demo` and `make test` do all their own set-up.
SHELL := /bin/bash
GO ?= go
# The modules build together through go.work (each requires the others at
# the version they are released at; go.work points them at this checkout).
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The library (.) and the modules kept apart so that the library's go.mod
# carries only what the library needs: the CLI, the benchmarks, the
# publishers with their brokers, the console's browser test, Docker servers.
MODULES := . bench cmd/sqlcoord outbox/natspub outbox/kafkapub console/browsertest containers scripts/modproxy
# bench/peers (River, watermill-sql, snowflake) builds only for `make bench-peers`.
# scripts/modproxy writes a local module proxy for install-test.

.PHONY: tidy setup test test-loaded test-short test-ha lint vet demo bench bench-peers bench-regress soak build clean install-test compat-test

# Idempotent: installs the database servers when missing, downloads modules.
setup:
	@bash scripts/setup.sh
	@for m in $(MODULES); do (cd $$m && $(GO) mod download) || exit 1; done
	@# the library's own versions, which TestDocSnippetsCompile builds with
	@# (GOWORK=off); the workspace may select newer ones (bench/peers)
	GOWORK=off $(GO) mod download

# The CLI with `sqlcoord bench` (build tag bench: plots, an embedded NATS
# server); `go install …/cmd/sqlcoord@version` gives the lean one without.
build:
	cd cmd/sqlcoord && $(GO) build -tags bench,full -o ../../bin/sqlcoord .

# gofmt, go vet, staticcheck and `go mod tidy` leaving go.mod/go.sum as
# committed, in every module.
lint:
	@bash scripts/lint.sh $(MODULES)

# go mod tidy in every module (against a local proxy of this checkout).
tidy:
	@TIDY=1 bash scripts/lint.sh $(MODULES) bench/peers

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

# Lint, then the whole suite of every module with the race detector
# against real PostgreSQL 15 and MariaDB servers (throwaway, started by
# the tests themselves); the modules' suites run side by side.
test: setup lint
	@bash scripts/test.sh -race -count=1 -timeout 20m
	@bash scripts/install-test.sh
	@bash scripts/compat-test.sh

# make test five times on a clean clone with two CPU-burning processes
# beside it (ARGS="3 /tmp/logs": runs and log folder).
test-loaded:
	@bash scripts/loaded-test.sh $(ARGS)

# The previous release (RELEASES) on this checkout's schema: its own
# conformance suite, both dialects (also run by `make test`).
compat-test:
	@bash scripts/compat-test.sh

# What a user does, in an empty module cache: go install the CLI and go get
# + build a new application, from a module proxy holding this checkout's
# modules as a release (scripts/install-test.sh; also run by `make test`).
install-test:
	@bash scripts/install-test.sh

# Without servers: the tests that need none (the others skip).
test-short:
	@bash scripts/test.sh -short -count=1

# Patroni failovers (Debian patroni + etcd-server, installed here): about
# 10 s per failover, so not part of `make test`.
test-ha:
	@bash scripts/setup.sh --ha
	$(GO) mod download
	$(GO) test -tags ha -count=1 -timeout 10m -run Patroni -v .

demo: setup build
	./bin/sqlcoord demo $(ARGS)

bench: setup build
	./bin/sqlcoord bench all $(ARGS)

# sqlcoord beside River, watermill-sql and bwmarrin/snowflake on throwaway
# servers (fsync on), interleaved rounds, median ratios. A module of its own
# (bench/peers) so the library's go.mod does not carry the peers.
bench-peers: setup
	@bash scripts/setup.sh --ha # etcd-server, for the election comparison
	cd bench/peers && $(GO) run . -rounds 3 -out ../out-peers.md $(ARGS)

# The working tree against the previous release (the newest in RELEASES,
# or ARGS="-prev 1.0.0"): both CLIs built, the same throwaway servers
# (fsync on), interleaved rounds; prints head ÷ previous per case and
# names the cases slower in every round.
bench-regress: setup
	cd bench && $(GO) run ./regress $(ARGS)

# Every primitive together for 30 minutes (ARGS="-duration 4h" for hours)
# on throwaway PostgreSQL and MariaDB servers, with relays and schedulers
# SIGKILLed and SIGSTOPped and the servers restarted every 10 minutes;
# fails when anything is lost or doubled or a series keeps growing.
# Writes bench/out/soak.{md,json,png}. Not part of `make test`.
soak: setup
	cd bench && $(GO) run ./soak -out out $(ARGS)

clean:
	rm -rf bin
