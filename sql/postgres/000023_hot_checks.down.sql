ALTER TABLE coord_leases ADD CONSTRAINT coord_leases_name_check CHECK (length(name) BETWEEN 1 AND 255),
  ADD CONSTRAINT coord_leases_token_check CHECK (token > 0);
ALTER TABLE coord_fences ADD CONSTRAINT coord_fences_resource_check CHECK (length(resource) BETWEEN 1 AND 255);
ALTER TABLE coord_locks ADD CONSTRAINT coord_locks_name_check CHECK (length(name) BETWEEN 1 AND 255);
ALTER TABLE coord_idempotency ADD CONSTRAINT coord_idempotency_scope_check CHECK (length(scope) BETWEEN 1 AND 255),
  ADD CONSTRAINT coord_idempotency_idem_key_check CHECK (length(idem_key) BETWEEN 1 AND 255),
  ADD CONSTRAINT coord_idempotency_state_check CHECK (state IN ('pending', 'done'));
ALTER TABLE coord_outbox ADD CONSTRAINT coord_outbox_topic_check CHECK (length(topic) BETWEEN 1 AND 255),
  ADD CONSTRAINT coord_outbox_state_check CHECK (state IN ('pending', 'published', 'dead'));
