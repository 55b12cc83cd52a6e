DROP TABLE IF EXISTS coord_inbox;
DROP TABLE IF EXISTS coord_outbox;
