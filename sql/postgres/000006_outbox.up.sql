-- Transactional outbox: a row is inserted in the business transaction, so a
-- message exists exactly when its transaction committed. Relays claim due
-- pending rows with FOR UPDATE SKIP LOCKED.
CREATE TABLE IF NOT EXISTS coord_outbox (
    id           bigserial   PRIMARY KEY,
    topic        text        NOT NULL CHECK (length(topic) BETWEEN 1 AND 255),
    msg_key      text,
    payload      bytea       NOT NULL,
    headers      text        NOT NULL DEFAULT '{}',
    state        text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'published', 'dead')),
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    available_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    published_at timestamptz
);
CREATE INDEX IF NOT EXISTS coord_outbox_due ON coord_outbox (available_at, id) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS coord_outbox_key ON coord_outbox (msg_key, id) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS coord_outbox_published ON coord_outbox (published_at) WHERE state = 'published';

-- Consumer inbox: one row per (consumer, message), written in the
-- consumer's transaction with its effect.
CREATE TABLE IF NOT EXISTS coord_inbox (
    consumer    text        NOT NULL CHECK (length(consumer) BETWEEN 1 AND 128),
    message_id  text        NOT NULL CHECK (length(message_id) BETWEEN 1 AND 255),
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX IF NOT EXISTS coord_inbox_received ON coord_inbox (received_at);
