-- Database-backed web sessions (package session); see the PostgreSQL file.
CREATE TABLE IF NOT EXISTS coord_sessions (
    id_hash         BINARY(32)      NOT NULL PRIMARY KEY,
    user_id         VARBINARY(255)  NOT NULL,
    data            LONGBLOB        NOT NULL,
    version         BIGINT          NOT NULL,
    created_at      DATETIME(6)     NOT NULL,
    last_seen_at    DATETIME(6)     NOT NULL,
    idle_expires_at DATETIME(6)     NOT NULL,
    abs_expires_at  DATETIME(6)     NOT NULL,
    KEY coord_sessions_user (user_id),
    KEY coord_sessions_idle (idle_expires_at)
) ENGINE=InnoDB;
