ALTER TABLE coord_outbox DROP KEY coord_outbox_pending;
