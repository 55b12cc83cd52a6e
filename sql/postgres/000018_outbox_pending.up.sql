-- The relays' claim (pending, due, ORDER BY id LIMIT n) walks this index
-- in id order and stops after its batch, instead of reading every due row
-- and sorting them: the claim's cost no longer grows with the backlog.
-- (Built without CONCURRENTLY, inside the migration: on a large outbox,
-- create it CONCURRENTLY by hand first; IF NOT EXISTS then skips it.)
CREATE INDEX IF NOT EXISTS coord_outbox_pending ON coord_outbox (id) WHERE state = 'pending';
