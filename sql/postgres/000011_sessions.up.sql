-- Database-backed web sessions (package session). The client holds only an
-- opaque token; the row is keyed by its SHA-256, so a dump of this table
-- yields no usable cookie. Every time is the database's clock.
CREATE TABLE IF NOT EXISTS coord_sessions (
    id_hash         bytea       PRIMARY KEY CHECK (length(id_hash) = 32),
    user_id         text        NOT NULL CHECK (length(user_id) <= 255),
    data            bytea       NOT NULL,
    version         bigint      NOT NULL CHECK (version > 0),
    created_at      timestamptz NOT NULL,
    last_seen_at    timestamptz NOT NULL,
    idle_expires_at timestamptz NOT NULL,
    abs_expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS coord_sessions_user ON coord_sessions (user_id);
CREATE INDEX IF NOT EXISTS coord_sessions_idle ON coord_sessions (idle_expires_at);
