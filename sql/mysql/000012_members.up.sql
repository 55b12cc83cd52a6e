-- Group membership (package membership); see the PostgreSQL file.
CREATE TABLE IF NOT EXISTS coord_members (
    group_name   VARBINARY(255) NOT NULL,
    member_id    VARBINARY(255) NOT NULL,
    meta         BLOB           NOT NULL,
    joined_at    DATETIME(6)    NOT NULL,
    heartbeat_at DATETIME(6)    NOT NULL,
    expires_at   DATETIME(6)    NOT NULL,
    PRIMARY KEY (group_name, member_id),
    KEY coord_members_expiry (expires_at)
) ENGINE=InnoDB;
