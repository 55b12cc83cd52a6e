-- Job retries. A run that returns an error is retried when its
-- job has a retry policy: the row goes to 'retry' with retry_at, and the
-- next instance to scan takes it over like a dead run (attempt + 1, the
-- fencing token). failures counts the attempts that ended in an error, in
-- the row, so a scheduler killed between attempts loses no count: the cap
-- is decided by the row. 'dead': the last attempt failed (or the error was
-- permanent). 'queued': the Queue overlap policy parked the slot until the
-- earlier runs of the job end. reason says why a slot was skipped, queued,
-- missed or declared dead.
ALTER TABLE coord_job_runs DROP CONSTRAINT IF EXISTS coord_job_runs_status_check;
ALTER TABLE coord_job_runs ADD CONSTRAINT coord_job_runs_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun', 'retry', 'dead', 'queued'));
ALTER TABLE coord_job_runs
    ADD COLUMN IF NOT EXISTS failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    ADD COLUMN IF NOT EXISTS retry_at timestamptz,
    ADD COLUMN IF NOT EXISTS reason   text;
