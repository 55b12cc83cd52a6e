-- Job attempts are fencing tokens and carry the failover epoch after a
-- promotion ((timeline - 1) << 40, see dialects/postgres.go): bigint.
ALTER TABLE coord_job_runs ALTER COLUMN attempt TYPE bigint;

-- When this database first saw each failover epoch (a WAL timeline), by
-- its own clock: after a promotion, worker ids are granted only once a
-- lease TTL plus margin has passed since then, so a holder whose grant or
-- heartbeats were lost with the old primary has stopped first.
CREATE TABLE coord_epochs (
    epoch      bigint      PRIMARY KEY,
    first_seen timestamptz NOT NULL
);
