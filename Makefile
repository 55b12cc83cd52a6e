# sqlcoord — see README.md. `make demo` and `make test` do all their own set-up.
SHELL := /bin/bash
GO ?= go
export GOFLAGS ?= -mod=mod

.PHONY: setup test test-ha vet demo bench bench-peers build clean

# Idempotent: installs the database servers when missing, downloads modules.
setup:
	@bash scripts/setup.sh
	$(GO) mod download

build:
	$(GO) build -o bin/sqlcoord ./cmd/sqlcoord

vet:
	$(GO) vet ./...

# Vet plus the whole suite with the race detector against real PostgreSQL 15
# and MariaDB servers (throwaway, started by the tests themselves).
test: setup vet
	$(GO) test -race -count=1 -timeout 20m ./...

# Patroni failovers (Debian patroni + etcd-server, installed here): about
# 10 s per failover, so not part of `make test`.
test-ha: vet
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
	cd bench/peers && $(GO) run . -rounds 3 -out ../out-peers.md $(ARGS)

clean:
	rm -rf bin
