-- Message ids chosen by the caller (outbox.Msg.ID), written by Enqueue in
-- the message's transaction: the unique index that refuses a second
-- message with the same id once coord_outbox is partitioned (see the
-- PostgreSQL migration). Times are UTC.
CREATE TABLE IF NOT EXISTS coord_outbox_ids (
    msg_id     CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    created_at DATETIME(6) NOT NULL,
    KEY coord_outbox_ids_created (created_at)
) ENGINE = InnoDB;
