ALTER TABLE coord_outbox DROP KEY coord_outbox_msg_id, DROP COLUMN msg_id;
