-- Job retries (see the PostgreSQL migration for the design). MariaDB
-- replaces a column's CHECK when the column is modified. (MySQL 8 keeps
-- the old table-level check: untested here, Debian ships no MySQL 8.)
ALTER TABLE coord_job_runs
    MODIFY status VARCHAR(12) NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun', 'retry', 'dead', 'queued')),
    ADD COLUMN failures INT NOT NULL DEFAULT 0,
    ADD COLUMN retry_at DATETIME(6) NULL,
    ADD COLUMN reason   TEXT NULL;
