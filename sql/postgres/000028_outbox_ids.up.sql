-- Message ids chosen by the caller (outbox.Msg.ID), one row each, written
-- by Enqueue in the same statement as the message: the unique index that
-- refuses a second message with the same id. coord_outbox's own unique
-- index on msg_id does that only while the table is not partitioned (a
-- partitioned table can enforce uniqueness only on keys that include the
-- partition key, here the id range); this table keeps doing it across
-- partitions and after a partition is dropped, until its rows are
-- cleaned up with the outbox's history (docs/retention.md). Ids Enqueue
-- generates (UUIDv7) are unique by construction and get no row here.
CREATE TABLE IF NOT EXISTS coord_outbox_ids (
    msg_id     uuid        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS coord_outbox_ids_created ON coord_outbox_ids (created_at);
