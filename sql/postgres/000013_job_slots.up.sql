-- A sharded job whose shard total comes from a membership group records
-- the total once per slot: every shard of the slot agrees on it even if
-- membership changes mid-slot.
CREATE TABLE IF NOT EXISTS coord_job_slots (
    job         text        NOT NULL,
    fire_time   timestamptz NOT NULL,
    shard_total integer     NOT NULL CHECK (shard_total > 0),
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (job, fire_time)
);
