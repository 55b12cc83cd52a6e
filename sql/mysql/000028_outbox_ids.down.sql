DROP TABLE IF EXISTS coord_outbox_ids;
