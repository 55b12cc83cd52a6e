-- Jobs a scheduler has registered, with the schedule it runs them on, so
-- that a manual rerun can be checked against a known job and a slot its
-- schedule produces. Written by Scheduler.Run at start.
CREATE TABLE IF NOT EXISTS coord_jobs (
    name       text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    schedule   text        NOT NULL,
    tz         text        NOT NULL,
    shards     integer     NOT NULL CHECK (shards > 0),
    updated_at timestamptz NOT NULL
);
