-- Segment ID allocation (Leaf-style): each fetch advances max_id by step
-- in one transaction, so ranges handed out never overlap.
CREATE TABLE IF NOT EXISTS coord_id_segments (
    biz_tag     text        PRIMARY KEY CHECK (length(biz_tag) BETWEEN 1 AND 128),
    max_id      bigint      NOT NULL CHECK (max_id >= 0),
    step        integer     NOT NULL CHECK (step > 0),
    description text        NOT NULL DEFAULT '',
    updated_at  timestamptz NOT NULL
);

-- Snowflake worker ids leased to live nodes. A worker id is reused only
-- after its lease expired plus a safety margin; last_ms is the newest
-- timestamp its owner reported issuing.
CREATE TABLE IF NOT EXISTS coord_id_workers (
    worker_id    integer     PRIMARY KEY CHECK (worker_id >= 0),
    owner        text        NOT NULL,
    expires_at   timestamptz NOT NULL,
    last_ms      bigint      NOT NULL DEFAULT 0,
    released     boolean     NOT NULL DEFAULT false,
    heartbeat_at timestamptz NOT NULL
);
