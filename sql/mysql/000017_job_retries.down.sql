UPDATE coord_job_runs SET status = 'failed' WHERE status IN ('retry', 'dead');
UPDATE coord_job_runs SET status = 'skipped' WHERE status = 'queued';
ALTER TABLE coord_job_runs
    MODIFY status VARCHAR(12) NOT NULL CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun')),
    DROP COLUMN failures,
    DROP COLUMN retry_at,
    DROP COLUMN reason;
