-- Row locks: one row per lock name, locked with SELECT ... FOR UPDATE in the
-- holder's transaction. Rows are created on first use and never deleted.
CREATE TABLE IF NOT EXISTS coord_locks (
    name       text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 255),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
