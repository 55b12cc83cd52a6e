-- A globally unique id per outbox message (UUIDv7 from Enqueue), used as
-- the dedup id towards brokers and inboxes. The bigserial id stays as the
-- ordering column only: it restarts after migrate down/up, differs between
-- services, and a failover can hand the same value to another message.
-- Rows from before this version get a random UUID; the default covers rows
-- inserted by anything other than sqlcoord.
ALTER TABLE coord_outbox ADD COLUMN IF NOT EXISTS msg_id uuid;
UPDATE coord_outbox SET msg_id = gen_random_uuid() WHERE msg_id IS NULL;
ALTER TABLE coord_outbox ALTER COLUMN msg_id SET DEFAULT gen_random_uuid();
ALTER TABLE coord_outbox ALTER COLUMN msg_id SET NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS coord_outbox_msg_id ON coord_outbox (msg_id);
