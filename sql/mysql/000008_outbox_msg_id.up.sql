-- A globally unique id per outbox message (UUIDv7 from Enqueue), used as
-- the dedup id towards brokers and inboxes; the AUTO_INCREMENT id stays as
-- the ordering column only (see the PostgreSQL migration). Rows from before
-- this version get UUID(); the default covers other writers.
ALTER TABLE coord_outbox ADD COLUMN msg_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL;
UPDATE coord_outbox SET msg_id = UUID() WHERE msg_id IS NULL;
ALTER TABLE coord_outbox MODIFY msg_id CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT (UUID()),
    ADD UNIQUE KEY coord_outbox_msg_id (msg_id);
