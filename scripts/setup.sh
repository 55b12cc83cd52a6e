#!/usr/bin/env bash
# Installs what sqlcoord's tests, demo and benchmarks need, when missing:
# the PostgreSQL 15 server, the MariaDB server, PgBouncer and Galera
# (galera-4, rsync) and Chromium for the console's browser test — Debian packages. Nothing is started here: the test harness starts throwaway
# servers (and bouncers) of its own.
set -euo pipefail

need=()
if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null 2>&1; then
  need+=(postgresql-15)
fi
if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
  need+=(mariadb-server)
fi
if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
  need+=(pgbouncer)
fi
if [ ! -e /usr/lib/galera/libgalera_smm.so ]; then
  need+=(galera-4)
fi
if ! command -v rsync >/dev/null 2>&1; then
  need+=(rsync) # Galera's state transfer between the throwaway nodes
fi
if ! command -v chromium >/dev/null 2>&1; then
  need+=(chromium) # the console's browser test (headless, driven by chromedp)
fi
if [ "${1:-}" = "--ha" ]; then # make test-ha: Patroni and its etcd
  command -v patroni >/dev/null 2>&1 || need+=(patroni)
  command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
fi
if [ ${#need[@]} -eq 0 ]; then
  echo "setup: database servers, pgbouncer and galera present"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing ${need[*]} and no apt-get; install them, or set SQLCOORD_PG_DSN / SQLCOORD_MYSQL_DSN" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${need[*]}"
# Packages must not start their own service (no init here; we start our own).
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "setup: installed ${need[*]}"
