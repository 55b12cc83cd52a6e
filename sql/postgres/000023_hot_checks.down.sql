-- Drops before it adds, so that it also runs where a constraint is there.
ALTER TABLE coord_leases DROP CONSTRAINT IF EXISTS coord_leases_name_check, ADD CONSTRAINT coord_leases_name_check CHECK (length(name) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_leases_token_check, ADD CONSTRAINT coord_leases_token_check CHECK (token > 0);
ALTER TABLE coord_fences DROP CONSTRAINT IF EXISTS coord_fences_resource_check, ADD CONSTRAINT coord_fences_resource_check CHECK (length(resource) BETWEEN 1 AND 255);
ALTER TABLE coord_locks DROP CONSTRAINT IF EXISTS coord_locks_name_check, ADD CONSTRAINT coord_locks_name_check CHECK (length(name) BETWEEN 1 AND 255);
ALTER TABLE coord_idempotency DROP CONSTRAINT IF EXISTS coord_idempotency_scope_check, ADD CONSTRAINT coord_idempotency_scope_check CHECK (length(scope) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_idempotency_idem_key_check, ADD CONSTRAINT coord_idempotency_idem_key_check CHECK (length(idem_key) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_idempotency_state_check, ADD CONSTRAINT coord_idempotency_state_check CHECK (state IN ('pending', 'done'));
ALTER TABLE coord_outbox DROP CONSTRAINT IF EXISTS coord_outbox_topic_check, ADD CONSTRAINT coord_outbox_topic_check CHECK (length(topic) BETWEEN 1 AND 255),
  DROP CONSTRAINT IF EXISTS coord_outbox_state_check, ADD CONSTRAINT coord_outbox_state_check CHECK (state IN ('pending', 'published', 'dead'));
ALTER TABLE coord_inbox DROP CONSTRAINT IF EXISTS coord_inbox_consumer_check, ADD CONSTRAINT coord_inbox_consumer_check CHECK (length(consumer) BETWEEN 1 AND 128),
  DROP CONSTRAINT IF EXISTS coord_inbox_message_id_check, ADD CONSTRAINT coord_inbox_message_id_check CHECK (length(message_id) BETWEEN 1 AND 255);
ALTER TABLE coord_txn_barrier DROP CONSTRAINT IF EXISTS coord_txn_barrier_gid_check, ADD CONSTRAINT coord_txn_barrier_gid_check CHECK (length(gid) BETWEEN 1 AND 128),
  DROP CONSTRAINT IF EXISTS coord_txn_barrier_branch_id_check, ADD CONSTRAINT coord_txn_barrier_branch_id_check CHECK (length(branch_id) BETWEEN 1 AND 128);
ALTER TABLE coord_txn_commits DROP CONSTRAINT IF EXISTS coord_txn_commits_id_check, ADD CONSTRAINT coord_txn_commits_id_check CHECK (length(id) BETWEEN 1 AND 255);
