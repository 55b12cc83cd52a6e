-- Group membership (package membership): a member is live while its
-- expires_at (database clock) is in the future; heartbeats push it on.
CREATE TABLE IF NOT EXISTS coord_members (
    group_name   text        NOT NULL CHECK (length(group_name) BETWEEN 1 AND 255),
    member_id    text        NOT NULL CHECK (length(member_id) BETWEEN 1 AND 255),
    meta         bytea       NOT NULL,
    joined_at    timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (group_name, member_id)
);
CREATE INDEX IF NOT EXISTS coord_members_expiry ON coord_members (expires_at);
