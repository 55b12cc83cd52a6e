-- No CHECK constraints on the other tables
-- sqlcoord writes per operation — job runs (a claim, a finish, a retry),
-- sessions (a touch), members (a heartbeat), saga and TCC rows (a step)
-- and election terms. PostgreSQL parses and plans a table's CHECK
-- expressions again at the start of every INSERT and UPDATE on it (see
-- migration 23); coord_job_runs alone had five. What they checked, the
-- client validates first (job, group, member, election names and user ids
-- as bytes, with UTF-8 and NUL; gids; 1 to 100 branches; shard < total) or
-- only sqlcoord's own statements write (states, modes, versions, terms,
-- failure counts, branch indexes, the 32-byte hash of a session id).
-- Keys, unique indexes, foreign keys, NOT NULL, varchar lengths and the
-- statements' own conditions (attempts, epochs, versions, expiry) are
-- unchanged: they are what the guarantees rest on. Each ALTER takes its
-- table's exclusive lock for a moment.
ALTER TABLE coord_job_runs DROP CONSTRAINT IF EXISTS coord_job_runs_job_check,
  DROP CONSTRAINT IF EXISTS coord_job_runs_shard_check,
  DROP CONSTRAINT IF EXISTS coord_job_runs_check,
  DROP CONSTRAINT IF EXISTS coord_job_runs_status_check,
  DROP CONSTRAINT IF EXISTS coord_job_runs_failures_check;
ALTER TABLE coord_sessions DROP CONSTRAINT IF EXISTS coord_sessions_id_hash_check,
  DROP CONSTRAINT IF EXISTS coord_sessions_user_id_check,
  DROP CONSTRAINT IF EXISTS coord_sessions_version_check;
ALTER TABLE coord_members DROP CONSTRAINT IF EXISTS coord_members_group_name_check,
  DROP CONSTRAINT IF EXISTS coord_members_member_id_check;
ALTER TABLE coord_gtx DROP CONSTRAINT IF EXISTS coord_gtx_mode_check,
  DROP CONSTRAINT IF EXISTS coord_gtx_status_check,
  DROP CONSTRAINT IF EXISTS coord_gtx_branches_check;
ALTER TABLE coord_gtx_branches DROP CONSTRAINT IF EXISTS coord_gtx_branches_idx_check,
  DROP CONSTRAINT IF EXISTS coord_gtx_branches_status_check;
ALTER TABLE coord_election_terms DROP CONSTRAINT IF EXISTS coord_election_terms_name_check,
  DROP CONSTRAINT IF EXISTS coord_election_terms_term_check;
