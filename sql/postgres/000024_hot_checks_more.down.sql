-- Drops before it adds, so that it also runs where a constraint is there.
ALTER TABLE coord_job_runs DROP CONSTRAINT IF EXISTS coord_job_runs_job_check, ADD CONSTRAINT coord_job_runs_job_check CHECK (length(job) BETWEEN 1 AND 128),
  DROP CONSTRAINT IF EXISTS coord_job_runs_shard_check, ADD CONSTRAINT coord_job_runs_shard_check CHECK (shard >= 0),
  DROP CONSTRAINT IF EXISTS coord_job_runs_check, ADD CONSTRAINT coord_job_runs_check CHECK (shard_total > shard),
  DROP CONSTRAINT IF EXISTS coord_job_runs_status_check, ADD CONSTRAINT coord_job_runs_status_check CHECK (status IN ('running', 'succeeded', 'failed', 'skipped', 'rerun', 'retry', 'dead', 'queued')),
  DROP CONSTRAINT IF EXISTS coord_job_runs_failures_check, ADD CONSTRAINT coord_job_runs_failures_check CHECK (failures >= 0);
ALTER TABLE coord_sessions DROP CONSTRAINT IF EXISTS coord_sessions_id_hash_check, ADD CONSTRAINT coord_sessions_id_hash_check CHECK (length(id_hash) = 32),
  DROP CONSTRAINT IF EXISTS coord_sessions_user_id_check, ADD CONSTRAINT coord_sessions_user_id_check CHECK (length(user_id) <= 255),
  DROP CONSTRAINT IF EXISTS coord_sessions_version_check, ADD CONSTRAINT coord_sessions_version_check CHECK (version > 0);
ALTER TABLE coord_members DROP CONSTRAINT IF EXISTS coord_members_group_name_check, ADD CONSTRAINT coord_members_group_name_check CHECK (length(group_name) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_members_member_id_check, ADD CONSTRAINT coord_members_member_id_check CHECK (length(member_id) BETWEEN 1 AND 255);
ALTER TABLE coord_gtx DROP CONSTRAINT IF EXISTS coord_gtx_mode_check, ADD CONSTRAINT coord_gtx_mode_check CHECK (mode IN ('saga', 'tcc')),
  DROP CONSTRAINT IF EXISTS coord_gtx_status_check, ADD CONSTRAINT coord_gtx_status_check CHECK (status IN ('running', 'confirming', 'compensating', 'succeeded', 'aborted', 'resolved')),
  DROP CONSTRAINT IF EXISTS coord_gtx_branches_check, ADD CONSTRAINT coord_gtx_branches_check CHECK (branches > 0);
ALTER TABLE coord_gtx_branches DROP CONSTRAINT IF EXISTS coord_gtx_branches_idx_check, ADD CONSTRAINT coord_gtx_branches_idx_check CHECK (idx >= 0),
  DROP CONSTRAINT IF EXISTS coord_gtx_branches_status_check, ADD CONSTRAINT coord_gtx_branches_status_check CHECK (status IN ('pending', 'done', 'failed', 'confirmed', 'undone'));
ALTER TABLE coord_election_terms DROP CONSTRAINT IF EXISTS coord_election_terms_name_check, ADD CONSTRAINT coord_election_terms_name_check CHECK (length(name) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_election_terms_term_check, ADD CONSTRAINT coord_election_terms_term_check CHECK (term > 0);
