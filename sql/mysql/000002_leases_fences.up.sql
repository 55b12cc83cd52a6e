-- Leases with fencing tokens. A row is never deleted, so a name's token only
-- grows: release sets expires_at to now and keeps owner and token.
-- Times are UTC, computed by the server (UTC_TIMESTAMP(6)).
CREATE TABLE IF NOT EXISTS coord_leases (
    name        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    owner       VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    token       BIGINT NOT NULL CHECK (token > 0),
    expires_at  DATETIME(6) NOT NULL,
    acquired_at DATETIME(6) NOT NULL,
    renewed_at  DATETIME(6) NOT NULL
) ENGINE = InnoDB;

-- The highest fencing token seen per protected resource.
CREATE TABLE IF NOT EXISTS coord_fences (
    resource   VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    fence      BIGINT NOT NULL,
    updated_at DATETIME(6) NOT NULL
) ENGINE = InnoDB;
