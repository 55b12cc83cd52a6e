-- Failover epochs for MySQL/MariaDB: the same design as
-- PostgreSQL's (see the postgres migration 16). A history is a server
-- writing as the primary, named by @@server_id (unique per server in a
-- replication topology): a promoted replica has another one, so its first
-- counter statement finds no row of its own that is the newest and starts
-- a new epoch, based on the clock:
--
--   base(new) = max(every recorded base + 1, milliseconds since 2020-01-01 · 2²²)
--
-- Every counter that must never go back (fencing tokens, segment ranges,
-- job attempts) is floored by the base. A restore from a dump or a
-- snapshot keeps @@server_id and the recorded rows, so it cannot be
-- detected here: run `sqlcoord epoch advance` after one (docs/failover.md).
-- Galera needs none (every commit is certified by the whole cluster).
CREATE TABLE IF NOT EXISTS coord_forks (
    server_id  BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    base       BIGINT          NOT NULL,
    first_seen DATETIME(6)     NOT NULL,
    reason     VARCHAR(255)    NOT NULL,
    UNIQUE KEY coord_forks_base (base)
) ENGINE = InnoDB;
INSERT IGNORE INTO coord_forks (server_id, base, first_seen, reason) VALUES (@@server_id, 0, UTC_TIMESTAMP(6), 'install');
ALTER TABLE coord_job_runs MODIFY attempt BIGINT NOT NULL;
