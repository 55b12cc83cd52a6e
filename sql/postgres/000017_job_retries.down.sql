-- Runs in the new states end as failed (retry, dead) or skipped (queued).
UPDATE coord_job_runs SET status = 'failed' WHERE status IN ('retry', 'dead');
UPDATE coord_job_runs SET status = 'skipped' WHERE status = 'queued';
ALTER TABLE coord_job_runs DROP CONSTRAINT IF EXISTS coord_job_runs_status_check;
ALTER TABLE coord_job_runs ADD CONSTRAINT coord_job_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun'));
ALTER TABLE coord_job_runs DROP COLUMN IF EXISTS failures, DROP COLUMN IF EXISTS retry_at, DROP COLUMN IF EXISTS reason;
