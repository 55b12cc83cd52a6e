-- Job attempts are fencing tokens and carry the failover epoch after a
-- promotion ((timeline - 1) << 40, see dialects/postgres.go): bigint.
ALTER TABLE coord_job_runs ALTER COLUMN attempt TYPE bigint;
