DROP INDEX IF EXISTS coord_outbox_pending;
