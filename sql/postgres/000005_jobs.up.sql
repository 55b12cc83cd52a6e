-- Scheduled job runs. One row per (job, planned fire time, shard): claiming
-- a slot is an INSERT, so the primary key decides the single winner. Rows
-- are kept, so a late instance (slow clock) cannot run the slot again.
-- attempt is the run's fencing token: a takeover bumps it, and heartbeats
-- or completions carrying an older attempt are refused.
CREATE TABLE IF NOT EXISTS coord_job_runs (
    job          text        NOT NULL CHECK (length(job) BETWEEN 1 AND 128),
    fire_time    timestamptz NOT NULL,
    shard        integer     NOT NULL CHECK (shard >= 0),
    shard_total  integer     NOT NULL CHECK (shard_total > shard),
    status       text        NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun')),
    owner        text        NOT NULL,
    attempt      integer     NOT NULL,
    started_at   timestamptz,
    heartbeat_at timestamptz,
    finished_at  timestamptz,
    error        text,
    PRIMARY KEY (job, fire_time, shard)
);
CREATE INDEX IF NOT EXISTS coord_job_runs_active ON coord_job_runs (job, status, heartbeat_at);
