DROP INDEX IF EXISTS coord_outbox_msg_id;
ALTER TABLE coord_outbox DROP COLUMN IF EXISTS msg_id;
