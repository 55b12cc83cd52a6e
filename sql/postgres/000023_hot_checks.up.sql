-- No CHECK constraints on the tables written on every
-- operation (leases, fences, locks, idempotency keys, the outbox and the
-- inbox, TCC/saga barriers, commit markers).
-- PostgreSQL rebuilds a table's CHECK expressions from their stored text
-- (parse and plan) at the start of every INSERT and UPDATE on it, however
-- long the statement has been prepared: ~15 µs of server CPU per write
-- here, a fifth of a lease's Acquire+Release at 8 clients. They checked
-- lengths the client validates first (as bytes, with UTF-8 and NUL, which
-- the database could not), states and tokens only sqlcoord's own
-- statements write. Primary keys, unique indexes, NOT NULL and the
-- statements' own conditions (fences, epochs, expiry) are unchanged: they
-- are what the guarantees rest on. Each ALTER takes its table's exclusive
-- lock for a moment.
ALTER TABLE coord_leases DROP CONSTRAINT IF EXISTS coord_leases_name_check,
  DROP CONSTRAINT IF EXISTS coord_leases_token_check;
ALTER TABLE coord_fences DROP CONSTRAINT IF EXISTS coord_fences_resource_check;
ALTER TABLE coord_locks DROP CONSTRAINT IF EXISTS coord_locks_name_check;
ALTER TABLE coord_idempotency DROP CONSTRAINT IF EXISTS coord_idempotency_scope_check,
  DROP CONSTRAINT IF EXISTS coord_idempotency_idem_key_check,
  DROP CONSTRAINT IF EXISTS coord_idempotency_state_check;
ALTER TABLE coord_outbox DROP CONSTRAINT IF EXISTS coord_outbox_topic_check,
  DROP CONSTRAINT IF EXISTS coord_outbox_state_check;
ALTER TABLE coord_inbox DROP CONSTRAINT IF EXISTS coord_inbox_consumer_check,
  DROP CONSTRAINT IF EXISTS coord_inbox_message_id_check;
ALTER TABLE coord_txn_barrier DROP CONSTRAINT IF EXISTS coord_txn_barrier_gid_check,
  DROP CONSTRAINT IF EXISTS coord_txn_barrier_branch_id_check;
ALTER TABLE coord_txn_commits DROP CONSTRAINT IF EXISTS coord_txn_commits_id_check;
