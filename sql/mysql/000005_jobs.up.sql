-- Scheduled job runs (see the PostgreSQL migration for the design).
-- Times are UTC DATETIME(6).
CREATE TABLE IF NOT EXISTS coord_job_runs (
    job          VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fire_time    DATETIME(6) NOT NULL,
    shard        INT NOT NULL CHECK (shard >= 0),
    shard_total  INT NOT NULL,
    status       VARCHAR(12) NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun')),
    owner        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    attempt      INT NOT NULL,
    started_at   DATETIME(6),
    heartbeat_at DATETIME(6),
    finished_at  DATETIME(6),
    error        TEXT,
    PRIMARY KEY (job, fire_time, shard),
    KEY coord_job_runs_active (job, status, heartbeat_at),
    CHECK (shard_total > shard)
) ENGINE = InnoDB;
