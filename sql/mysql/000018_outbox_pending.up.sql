-- The relays' claim walks this index in id order and stops at its batch
-- (FORCE INDEX in the claim): every relay locks the same index records the
-- same way. With only (state, available_at, id), the optimizer chose per
-- statement between a scan of that index, which locked every pending row
-- before sorting, and a primary-key scan, which locks no index record;
-- relays on different plans deadlocked on each other's batches.
ALTER TABLE coord_outbox ADD KEY coord_outbox_pending (state, id, available_at);
