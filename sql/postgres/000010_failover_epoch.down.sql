DROP TABLE IF EXISTS coord_epochs;
-- Fails if a run's attempt carries a failover epoch (does not fit integer):
-- such rows must be finished and cleaned up first.
ALTER TABLE coord_job_runs ALTER COLUMN attempt TYPE integer;
